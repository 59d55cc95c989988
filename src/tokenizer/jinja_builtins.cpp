#include "tokenizer/jinja_builtins.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace th::jinja {

// --- helpers the evaluator and the filters share ----------------------------

// An index into a sequence of `len` items, Python-style (negative from the
// end); -1 when out of range.
int64_t resolve_index(double idx, size_t len) {
  if (!std::isfinite(idx) || std::fabs(idx) > 1e15) return -1;
  auto i = static_cast<int64_t>(idx);
  if (i < 0) i += static_cast<int64_t>(len);
  return i < 0 || i >= static_cast<int64_t>(len) ? -1 : i;
}

// Python's list slicing as @huggingface/jinja does it: the indices of
// [start:stop:step] over `len` items.
std::vector<size_t> slice_indices(size_t len, const Value& start, const Value& stop, const Value& step) {
  const double L = static_cast<double>(len);
  auto clamp = [&](double v) { return std::max(-L - 2, std::min(L + 2, v)); };
  const double st = step.is_undefined() ? 1 : clamp(step.num);
  const double dir = st > 0 ? 1 : st < 0 ? -1 : 0;
  double b, e;
  if (dir >= 0) {
    b = start.is_undefined() ? 0 : clamp(start.num);
    b = b < 0 ? std::max(L + b, 0.0) : std::min(b, L);
    e = stop.is_undefined() ? L : clamp(stop.num);
    e = e < 0 ? std::max(L + e, 0.0) : std::min(e, L);
  } else {
    b = start.is_undefined() ? L - 1 : clamp(start.num);
    b = b < 0 ? std::max(L + b, -1.0) : std::min(b, L - 1);
    e = stop.is_undefined() ? -1 : clamp(stop.num);
    e = e < -1 ? std::max(L + e, -1.0) : std::min(e, L - 1);
  }
  std::vector<size_t> out;
  const auto s = static_cast<int64_t>(st);
  for (auto i = static_cast<int64_t>(b); dir * static_cast<double>(i) < dir * e; i += s) out.push_back(static_cast<size_t>(i));
  return out;
}

// `item.a.b.0`: dict keys and list indices along a dotted path.
Value attribute_path(const Value& item, std::string_view path) {
  Value v = item;
  while (true) {
    const size_t dot = path.find('.');
    const std::string_view part = path.substr(0, dot);
    if (v.kind == Kind::Object || v.kind == Kind::Namespace) {
      const Value* f = v.obj->find(part);
      if (!f) return Value::undefined();
      v = *f;
    } else if (v.is_array()) {
      char* end = nullptr;
      const std::string p(part);
      const long i = std::strtol(p.c_str(), &end, 10);
      if (end == p.c_str() || i < 0 || static_cast<size_t>(i) >= v.items().size()) return Value::undefined();
      v = v.items()[static_cast<size_t>(i)];
    } else {
      return Value::undefined();
    }
    if (dot == std::string_view::npos) return v;
    path = path.substr(dot + 1);
  }
}

bool is_mapping(const Value& v) { return v.kind == Kind::Object || v.kind == Kind::Namespace; }

const Value& arg_or(const CallArgs& c, size_t i, const char* name, const Value& dflt) {
  if (i < c.args.size()) return c.args[i];
  if (const Value* k = c.kwarg(name)) return *k;
  return dflt;
}

std::shared_ptr<const FunctionData> builtin(std::string name, Builtin fn, Value self) {
  auto f = std::make_shared<FunctionData>();
  f->name = std::move(name);
  f->builtin = fn;
  f->self = std::move(self);
  return f;
}

namespace {

bool is_word_byte(unsigned char c) { return std::isalnum(c) || c == '_'; }

}  // namespace

std::string title_case(const std::string& s) {
  // JavaScript's /\b\w/g -> upper case: the first word character after a non-word one.
  std::string out = s;
  for (size_t i = 0; i < out.size(); ++i) {
    const auto c = static_cast<unsigned char>(out[i]);
    if (is_word_byte(c) && (i == 0 || !is_word_byte(static_cast<unsigned char>(out[i - 1]))))
      out[i] = static_cast<char>(std::toupper(c));
  }
  return out;
}

std::string capitalize(const std::string& s) {
  if (s.empty()) return s;
  const auto cps = cp_split(s);
  return to_upper(cps[0]) + s.substr(cps[0].size());
}

// --- global functions --------------------------------------------------------

namespace {

Value bf_raise_exception(Interpreter&, const Value&, CallArgs& c) {
  const std::string msg = c.args.empty() ? "" : js_string(c.args[0]);
  fail("the template raised an error: " + msg);
}

Value bf_range(Interpreter& in, const Value&, CallArgs& c) {
  if (c.args.empty() || c.args.size() > 3) fail("range() takes 1 to 3 arguments");
  for (const Value& a : c.args)
    if (!a.is_number()) fail(std::string("range() arguments must be numbers, not ") + kind_name(a));
  double start = 0, stop, step = 1;
  if (c.args.size() == 1) {
    stop = c.args[0].num;
  } else {
    start = c.args[0].num;
    stop = c.args[1].num;
    if (c.args.size() == 3) step = c.args[2].num;
  }
  if (step == 0) fail("range() step must not be zero");
  const double n = std::ceil((stop - start) / step);
  if (!(n > 0)) return in.make_array({});
  if (n > 1e8) fail("range() of " + js_number(n) + " items is too long");
  in.charge(static_cast<size_t>(n) * sizeof(Value));
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(n));
  // Counting as JavaScript does (v += step), but never past n items: where
  // step is below the precision of v, v would stop moving.
  for (double v = start; (step > 0 ? v < stop : v > stop) && static_cast<double>(items.size()) < n; v += step)
    items.push_back(std::floor(v) == v ? Value::integer(v) : Value::floating(v));
  return Value::array(std::move(items));
}

Value bf_namespace(Interpreter& in, const Value&, CallArgs& c) {
  auto ns = in.new_namespace();
  if (c.args.size() > 1) fail("namespace() takes at most 1 positional argument");
  if (c.args.size() == 1) {
    const Value& src = c.args[0];
    if (src.kind == Kind::Object) {
      for (const auto& [k, v] : src.obj->entries) ns->set(k, v);
    } else if (src.is_array()) {
      for (const Value& pair : src.items()) {
        std::vector<Value> kv;
        if (pair.is_array()) kv = pair.items();
        else if (pair.is_string())
          for (std::string_view ch : cp_split(pair.s())) kv.push_back(Value::string(std::string(ch)));
        if (kv.size() != 2) fail("namespace() expects a dict or a list of [key, value] pairs");
        if (!kv[0].is_string()) fail("namespace() keys must be strings");
        ns->set(kv[0].s(), kv[1]);
      }
    } else {
      fail("namespace() cannot take " + a_kind(src));
    }
  }
  for (const auto& [k, v] : c.kwargs) ns->set(k, v);
  if (ns->depth > kMaxValueDepth) fail("a namespace is nested too deeply");
  return Value::namespace_(std::move(ns));
}

Value bf_dict(Interpreter&, const Value&, CallArgs& c) {
  auto o = std::make_shared<ObjectData>();
  for (const auto& [k, v] : c.kwargs) o->set(k, v);
  if (o->depth > kMaxValueDepth) fail("a dict is nested too deeply");
  return Value::object(std::move(o));
}

Value bf_strftime_now(Interpreter& in, const Value&, CallArgs& c) {
  if (c.args.empty() || !c.args[0].is_string()) fail("strftime_now() takes a format string");
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  static const char* kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                  "July",    "August",   "September", "October", "November", "December"};
  // snprintf, not "0" + to_string: GCC 12 warns (-Wrestrict, a false positive) on the latter here.
  auto pad2 = [](int v) {  // v: a month, day, hour or minute, 0..59
    char b[16];
    std::snprintf(b, sizeof b, "%02d", v);
    return std::string(b);
  };
  const std::string& f = c.args[0].s();
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%' || i + 1 >= f.size()) {
      out += f[i];
      continue;
    }
    const char k = f[++i];
    switch (k) {
      case 'Y': out += std::to_string(tm.tm_year + 1900); break;
      case 'm': out += pad2(tm.tm_mon + 1); break;
      case 'd': out += pad2(tm.tm_mday); break;
      case 'b': out += std::string(kMonths[tm.tm_mon]).substr(0, 3); break;
      case 'B': out += kMonths[tm.tm_mon]; break;
      case 'H': out += pad2(tm.tm_hour); break;
      case 'M': out += pad2(tm.tm_min); break;
      case '%': out += '%'; break;
      default: out += '%'; out += k;
    }
  }
  return in.make_string(std::move(out));
}

// --- methods -----------------------------------------------------------------

// String methods ("abc".upper() and the like), bound to the string.
const std::string& self_str(const Value& self) { return self.s(); }

Value sm_upper(Interpreter& in, const Value& s, CallArgs&) { return in.make_string(to_upper(self_str(s))); }
Value sm_lower(Interpreter& in, const Value& s, CallArgs&) { return in.make_string(to_lower(self_str(s))); }
Value sm_strip(Interpreter& in, const Value& s, CallArgs&) { return in.make_string(std::string(js_trim(self_str(s)))); }
Value sm_lstrip(Interpreter& in, const Value& s, CallArgs&) { return in.make_string(std::string(js_trim_start(self_str(s)))); }
Value sm_rstrip(Interpreter& in, const Value& s, CallArgs&) { return in.make_string(std::string(js_trim_end(self_str(s)))); }

Value sm_title(Interpreter& in, const Value& s, CallArgs&) { return in.make_string(title_case(self_str(s))); }

Value sm_capitalize(Interpreter& in, const Value& s, CallArgs&) { return in.make_string(capitalize(self_str(s))); }

Value affix_test(const Value& s, CallArgs& c, bool prefix, const char* name) {
  if (c.args.empty()) fail(std::string(name) + "() needs an argument");
  const std::string& str = self_str(s);
  auto match = [&](const std::string& a) {
    return prefix ? str.compare(0, a.size(), a) == 0
                  : a.size() <= str.size() && str.compare(str.size() - a.size(), a.size(), a) == 0;
  };
  const Value& p = c.args[0];
  if (p.is_string()) return Value::boolean(match(p.s()));
  if (p.is_array()) {
    for (const Value& x : p.items()) {
      if (!x.is_string()) fail(std::string(name) + "() takes strings");
      if (match(x.s())) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  fail(std::string(name) + "() takes a string or a tuple of strings");
}
Value sm_startswith(Interpreter&, const Value& s, CallArgs& c) { return affix_test(s, c, true, "startswith"); }
Value sm_endswith(Interpreter&, const Value& s, CallArgs& c) { return affix_test(s, c, false, "endswith"); }

Value sm_split(Interpreter& in, const Value& s, CallArgs& c) {
  static const Value kNone = Value::null(), kMinusOne = Value::integer(-1);
  const Value& sep = arg_or(c, 0, "sep", kNone);
  const Value& maxv = arg_or(c, 1, "maxsplit", kMinusOne);
  if (!sep.is_string() && !sep.is_null()) fail("split(): sep must be a string or none");
  if (maxv.kind != Kind::Int) fail("split(): maxsplit must be an integer");
  const double maxsplit = maxv.num;
  const std::string& str = self_str(s);
  std::vector<Value> parts;
  if (sep.is_null()) {
    const std::string_view text = js_trim_start(str);
    size_t i = 0;
    while (i < text.size()) {
      const size_t start = i;
      while (i < text.size() && !js_space_len(text, i)) ++i;
      if (maxsplit != -1 && static_cast<double>(parts.size()) >= maxsplit) {
        parts.push_back(Value::string(std::string(text.substr(start))));
        break;
      }
      parts.push_back(Value::string(std::string(text.substr(start, i - start))));
      while (size_t n = js_space_len(text, i)) i += n;
    }
  } else {
    const std::string& d = sep.s();
    if (d.empty()) fail("split(): empty separator");
    std::vector<std::string> pieces;
    size_t start = 0;
    while (true) {
      const size_t at = str.find(d, start);
      if (at == std::string::npos) break;
      pieces.push_back(str.substr(start, at - start));
      start = at + d.size();
    }
    pieces.push_back(str.substr(start));
    if (maxsplit != -1 && static_cast<double>(pieces.size()) > maxsplit) {
      const size_t keep = maxsplit < 0 ? 0 : static_cast<size_t>(maxsplit);
      std::string rest;
      for (size_t i = keep; i < pieces.size(); ++i) rest += (i > keep ? d : "") + pieces[i];
      pieces.resize(keep);
      pieces.push_back(std::move(rest));
    }
    for (std::string& p : pieces) parts.push_back(Value::string(std::move(p)));
  }
  in.charge(str.size() + parts.size() * sizeof(Value));
  return Value::array(std::move(parts));
}

std::string replace_str(const std::string& s, const std::string& from, const std::string& to, double count) {
  if (count == 0) return s;
  double remaining = count < 0 || std::isnan(count) ? INFINITY : count;
  std::string out;
  if (from.empty()) {
    // Between every two characters, and at both ends.
    const auto cps = cp_split(s);
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (remaining > 0) {
        out += to;
        --remaining;
      }
      if (i < cps.size()) out += cps[i];
    }
    return out;
  }
  size_t start = 0;
  while (remaining > 0) {
    const size_t at = s.find(from, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += to;
    start = at + from.size();
    --remaining;
  }
  out.append(s, start);
  return out;
}

Value sm_replace(Interpreter& in, const Value& s, CallArgs& c) {
  if (c.args.size() < 2) fail("replace() needs two arguments");
  if (!c.args[0].is_string() || !c.args[1].is_string()) fail("replace() arguments must be strings");
  static const Value kNone = Value::null();
  const Value& count = arg_or(c, 2, "count", kNone);
  if (count.kind != Kind::Int && !count.is_null()) fail("replace(): count must be an integer or none");
  const std::string& str = self_str(s);
  const std::string& from = c.args[0].s();
  const std::string& to = c.args[1].s();
  // Bound the result before building it: "x".replace("", big) on a long string.
  const double n = from.empty() ? static_cast<double>(cp_count(str) + 1) : static_cast<double>(str.size());
  in.charge(static_cast<size_t>(std::min(n * static_cast<double>(to.size()), 1e15)));
  return in.make_string(replace_str(str, from, to, count.is_null() ? -1 : count.num));
}

// Dict methods.
Value om_get(Interpreter&, const Value& self, CallArgs& c) {
  if (c.args.empty() || !c.args[0].is_string())
    fail(std::string("get(): the key must be a string, not ") + (c.args.empty() ? "nothing" : kind_name(c.args[0])));
  if (const Value* v = self.obj->find(c.args[0].s())) return *v;
  return c.args.size() > 1 ? c.args[1] : Value::null();
}
Value om_items(Interpreter& in, const Value& self, CallArgs&) {
  std::vector<Value> out;
  for (const auto& [k, v] : self.obj->entries) out.push_back(Value::array({Value::string(k), v}));
  return in.make_array(std::move(out));
}
Value om_keys(Interpreter& in, const Value& self, CallArgs&) {
  std::vector<Value> out;
  for (const auto& e : self.obj->entries) out.push_back(Value::string(e.first));
  return in.make_array(std::move(out));
}
Value om_values(Interpreter& in, const Value& self, CallArgs&) {
  std::vector<Value> out;
  for (const auto& e : self.obj->entries) out.push_back(e.second);
  return in.make_array(std::move(out));
}
Value om_dictsort(Interpreter& in, const Value& self, CallArgs& c) {
  static const Value kFalse = Value::boolean(false), kKey = Value::string("key");
  const Value& cs = arg_or(c, 0, "case_sensitive", kFalse);
  const Value& by = arg_or(c, 1, "by", kKey);
  const Value& rev = arg_or(c, 2, "reverse", kFalse);
  if (cs.kind != Kind::Bool) fail("dictsort(): case_sensitive must be a boolean");
  if (!by.is_string() || (by.s() != "key" && by.s() != "value")) fail("dictsort(): by must be 'key' or 'value'");
  if (rev.kind != Kind::Bool) fail("dictsort(): reverse must be a boolean");
  std::vector<Value> items;
  for (const auto& [k, v] : self.obj->entries) items.push_back(Value::array({Value::string(k), v}));
  const size_t idx = by.s() == "key" ? 0 : 1;
  merge_sort(items, [&](const Value& a, const Value& b) {
    const int r = compare_values(a.items()[idx], b.items()[idx], cs.b);
    return rev.b ? r > 0 : r < 0;
  });
  return in.make_array(std::move(items));
}

struct Method {
  const char* name;
  Builtin fn;
};
const Method kStringMethods[] = {
    {"upper", sm_upper},         {"lower", sm_lower},       {"strip", sm_strip},
    {"title", sm_title},         {"capitalize", sm_capitalize}, {"rstrip", sm_rstrip},
    {"lstrip", sm_lstrip},       {"startswith", sm_startswith}, {"endswith", sm_endswith},
    {"split", sm_split},         {"replace", sm_replace},
};
const Method kObjectMethods[] = {
    {"get", om_get}, {"items", om_items}, {"keys", om_keys}, {"values", om_values}, {"dictsort", om_dictsort},
};

template <size_t N>
Builtin find_method(const Method (&table)[N], std::string_view name) {
  for (const Method& m : table)
    if (name == m.name) return m.fn;
  return nullptr;
}

}  // namespace

void add_global_functions(Env& globals) {
  auto fn = [](const char* name, Builtin b) { return Value::function(builtin(name, b)); };
  globals.set("namespace", fn("namespace", bf_namespace));
  globals.set("raise_exception", fn("raise_exception", bf_raise_exception));
  globals.set("range", fn("range", bf_range));
  globals.set("strftime_now", fn("strftime_now", bf_strftime_now));
  globals.set("dict", fn("dict", bf_dict));
}

Builtin find_string_method(std::string_view name) { return find_method(kStringMethods, name); }
Builtin find_object_method(std::string_view name) { return find_method(kObjectMethods, name); }

// --- tests ('x is defined') ----------------------------------------------------

bool Interpreter::run_test(const std::string& name, const Value& v, const std::vector<Value>& args) {
  auto need_arg = [&]() -> const Value& {
    if (args.empty()) fail("the test '" + name + "' needs an argument");
    return args[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_null();
  if (name == "boolean") return v.kind == Kind::Bool;
  if (name == "true") return v.kind == Kind::Bool && v.b;
  if (name == "false") return v.kind == Kind::Bool && !v.b;
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind == Kind::Int;
  if (name == "float") return v.kind == Kind::Float;
  if (name == "iterable") return (v.is_array() && !v.is_tuple) || v.is_string();
  if (name == "mapping") return v.kind == Kind::Object;
  if (name == "sequence") return v.is_array() || v.kind == Kind::Object || v.is_string();
  if (name == "callable") return v.kind == Kind::Function;
  if (name == "lower") return v.is_string() && v.s() == to_lower(v.s());
  if (name == "upper") return v.is_string() && v.s() == to_upper(v.s());
  if (name == "odd" || name == "even") {
    if (v.kind != Kind::Int) fail("the test '" + name + "' needs an integer, not " + a_kind(v));
    const bool odd = std::fmod(v.num, 2) != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "equalto" || name == "eq" || name == "==") return strict_equals(v, need_arg());
  if (name == "ne" || name == "!=") return !strict_equals(v, need_arg());
  if (name == "sameas") return strict_equals(v, need_arg());
  if (name == "divisibleby") {
    const Value& d = need_arg();
    if (!v.is_number() || !d.is_number() || d.num == 0) fail("divisibleby needs two numbers, the divisor not 0");
    return std::fmod(v.num, d.num) == 0;
  }
  if (name == "lt" || name == "<" || name == "gt" || name == ">" || name == "le" || name == "<=" || name == "ge" ||
      name == ">=") {
    const int c = compare_values(v, need_arg(), true);
    if (name == "lt" || name == "<") return c < 0;
    if (name == "gt" || name == ">") return c > 0;
    if (name == "le" || name == "<=") return c <= 0;
    return c >= 0;
  }
  if (name == "in") {
    const Value& seq = need_arg();
    if (seq.is_array()) {
      for (const Value& x : seq.items())
        if (strict_equals(x, v)) return true;
      return false;
    }
    if (seq.is_string() && v.is_string()) return seq.s().find(v.s()) != std::string::npos;
    if (seq.kind == Kind::Object && v.is_string()) return seq.obj->find(v.s()) != nullptr;
    fail("the test 'in' cannot look in " + a_kind(seq));
  }
  fail("unknown test '" + name + "'");
}

}  // namespace th::jinja
