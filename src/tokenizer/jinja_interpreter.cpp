#include "tokenizer/jinja_interpreter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <set>

namespace th::jinja {

const Value* Env::lookup(std::string_view name) const {
  for (const Env* e = this; e; e = e->parent.get()) {
    auto it = e->vars.find(name);
    if (it != e->vars.end()) return &it->second;
  }
  return nullptr;
}

namespace {

// --- small helpers -----------------------------------------------------------


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

// A stable merge sort whose comparator may throw: std::sort with an
// inconsistent comparator (NaN, mixed types) is undefined behaviour.
template <class Less>
void merge_sort(std::vector<Value>& v, Less less) {
  std::vector<Value> tmp(v.size());
  for (size_t width = 1; width < v.size(); width *= 2) {
    for (size_t lo = 0; lo < v.size(); lo += 2 * width) {
      const size_t mid = std::min(lo + width, v.size()), hi = std::min(lo + 2 * width, v.size());
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) tmp[k++] = less(v[j], v[i]) ? v[j++] : v[i++];
      while (i < mid) tmp[k++] = v[i++];
      while (j < hi) tmp[k++] = v[j++];
    }
    v.swap(tmp);
  }
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

// JavaScript's parseInt(s, 10) / parseFloat(s): the longest number at the
// start (after whitespace); NaN when there is none.
double js_parse_number(std::string_view s, bool integer) {
  s = js_trim_start(s);
  auto digit = [&](size_t i) { return i < s.size() && s[i] >= '0' && s[i] <= '9'; };
  size_t i = 0, digits = 0;
  std::string t;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) t += s[i++];
  if (!integer && s.substr(i, 8) == "Infinity") return t == "-" ? -INFINITY : INFINITY;
  while (digit(i)) t += s[i++], ++digits;
  if (!integer) {
    if (i < s.size() && s[i] == '.' && (digits || digit(i + 1))) {
      t += s[i++];
      while (digit(i)) t += s[i++], ++digits;
    }
    if (digits && i < s.size() && (s[i] | 0x20) == 'e') {
      size_t j = i + 1;
      std::string e = "e";
      if (j < s.size() && (s[j] == '+' || s[j] == '-')) e += s[j++];
      if (digit(j)) {
        while (digit(j)) e += s[j++];
        t += e;
      }
    }
  }
  return digits ? std::strtod(t.c_str(), nullptr) : NAN;
}

bool is_mapping(const Value& v) { return v.kind == Kind::Object || v.kind == Kind::Namespace; }

const Value& arg_or(const CallArgs& c, size_t i, const char* name, const Value& dflt) {
  if (i < c.args.size()) return c.args[i];
  if (const Value* k = c.kwarg(name)) return *k;
  return dflt;
}

// --- builtins ----------------------------------------------------------------

std::shared_ptr<const FunctionData> builtin(std::string name, Builtin fn, Value self = {}) {
  auto f = std::make_shared<FunctionData>();
  f->name = std::move(name);
  f->builtin = fn;
  f->self = std::move(self);
  return f;
}

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
  auto pad2 = [](int v) { return (v < 10 ? "0" : "") + std::to_string(v); };
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

// String methods ("abc".upper() and the like), bound to the string.
const std::string& self_str(const Value& self) { return self.s(); }

Value sm_upper(Interpreter& in, const Value& s, CallArgs&) { return in.make_string(to_upper(self_str(s))); }
Value sm_lower(Interpreter& in, const Value& s, CallArgs&) { return in.make_string(to_lower(self_str(s))); }
Value sm_strip(Interpreter& in, const Value& s, CallArgs&) { return in.make_string(std::string(js_trim(self_str(s)))); }
Value sm_lstrip(Interpreter& in, const Value& s, CallArgs&) { return in.make_string(std::string(js_trim_start(self_str(s)))); }
Value sm_rstrip(Interpreter& in, const Value& s, CallArgs&) { return in.make_string(std::string(js_trim_end(self_str(s)))); }

bool is_word_byte(unsigned char c) { return std::isalnum(c) || c == '_'; }

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
Value sm_title(Interpreter& in, const Value& s, CallArgs&) { return in.make_string(title_case(self_str(s))); }

std::string capitalize(const std::string& s) {
  if (s.empty()) return s;
  const auto cps = cp_split(s);
  return to_upper(cps[0]) + s.substr(cps[0].size());
}
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

const std::set<std::string, std::less<>>& known_filters() {
  static const std::set<std::string, std::less<>> k = {
      "abs", "bool", "capitalize", "default", "dictsort", "first", "float", "indent", "int", "items", "join",
      "keys", "last", "length", "list", "lower", "map", "reject", "rejectattr", "replace", "reverse",
      "safe", "select", "selectattr", "sort", "string", "tojson", "title", "trim", "unique", "upper",
      "values", "get", "count", "d",
  };
  return k;
}

}  // namespace

// --- the interpreter ---------------------------------------------------------

struct Interpreter::DepthGuard {
  explicit DepthGuard(Interpreter& in) : in(in) {
    if (++in.depth_ > in.limits_.max_depth)
      fail("the template nests too deeply (limit " + std::to_string(in.limits_.max_depth) +
           "; a macro recursing without end?)");
  }
  ~DepthGuard() { --in.depth_; }
  Interpreter& in;
};

Interpreter::Interpreter(const Program& program, const RenderLimits& limits) : program_(program), limits_(limits) {}

Interpreter::~Interpreter() {
  // Break reference cycles through namespaces and captured scopes.
  for (auto& ns : namespaces_) {
    auto entries = std::move(ns->entries);
    ns->index.clear();
  }
  for (auto& env : captured_) {
    auto vars = std::move(env->vars);
    env->parent.reset();
  }
}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps)
    fail("the template did too much work (over " + std::to_string(limits_.max_steps) + " steps; an endless loop?)");
}

void Interpreter::charge(size_t bytes) {
  allocated_ += bytes;
  if (allocated_ > limits_.max_alloc_bytes || bytes > limits_.max_alloc_bytes)
    fail("the template used too much memory (over " + std::to_string(limits_.max_alloc_bytes >> 20) + " MiB)");
}

Value Interpreter::make_string(std::string s) {
  if (s.size() > limits_.max_output_bytes)
    fail("a string grew too long (over " + std::to_string(limits_.max_output_bytes >> 20) + " MiB)");
  charge(s.size());
  return Value::string(std::move(s));
}

Value Interpreter::make_array(std::vector<Value> items) {
  charge(items.size() * sizeof(Value));
  return Value::array(std::move(items));
}

std::shared_ptr<ObjectData> Interpreter::new_namespace() {
  charge(sizeof(ObjectData));
  auto ns = std::make_shared<ObjectData>();
  namespaces_.push_back(ns);
  return ns;
}

void Interpreter::append(std::string& out, std::string_view s) {
  if (out.size() + s.size() > limits_.max_output_bytes)
    fail("the output grew too long (over " + std::to_string(limits_.max_output_bytes >> 20) + " MiB)");
  charge(s.size());
  out += s;
}

std::string Interpreter::render(const std::vector<std::pair<std::string, Value>>& context) {
  auto globals = std::make_shared<Env>();
  auto fn = [](const char* name, Builtin b) { return Value::function(builtin(name, b)); };
  globals->set("true", Value::boolean(true));
  globals->set("false", Value::boolean(false));
  globals->set("none", Value::null());
  globals->set("True", Value::boolean(true));
  globals->set("False", Value::boolean(false));
  globals->set("None", Value::null());
  globals->set("namespace", fn("namespace", bf_namespace));
  globals->set("raise_exception", fn("raise_exception", bf_raise_exception));
  globals->set("range", fn("range", bf_range));
  globals->set("strftime_now", fn("strftime_now", bf_strftime_now));
  globals->set("dict", fn("dict", bf_dict));
  for (const auto& [k, v] : context) globals->set(k, v);
  std::string out;
  const Flow f = exec_block(program_.body, globals, out);
  if (f != Flow::Normal) fail(f == Flow::Break ? "'{% break %}' outside a loop" : "'{% continue %}' outside a loop");
  return out;
}

Interpreter::Flow Interpreter::exec_block(const std::vector<NodePtr>& body, const EnvPtr& env, std::string& out) {
  for (const NodePtr& n : body) {
    const Flow f = exec(*n, env, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

std::string Interpreter::render_body(const std::vector<NodePtr>& body, const EnvPtr& env, const char* what) {
  std::string out;
  const Flow f = exec_block(body, env, out);
  if (f != Flow::Normal) fail(std::string(f == Flow::Break ? "'{% break %}'" : "'{% continue %}'") + " outside a loop in " + what);
  return out;
}

Interpreter::Flow Interpreter::exec(const Node& n, const EnvPtr& env, std::string& out) {
  step();
  DepthGuard guard(*this);
  try {
    switch (n.kind) {
      case NodeKind::Text: append(out, n.name); return Flow::Normal;
      case NodeKind::Output: {
        const Value v = eval(*n.kids[0], env);
        if (!v.is_null() && !v.is_undefined()) append(out, output_string(v));
        return Flow::Normal;
      }
      case NodeKind::If: return exec_block(eval(*n.kids[0], env).truthy() ? n.body : n.alt, env, out);
      case NodeKind::For: return exec_for(n, env, out);
      case NodeKind::Set: exec_set(n, env); return Flow::Normal;
      case NodeKind::Macro: {
        auto f = std::make_shared<FunctionData>();
        f->name = n.name;
        f->macro = &n;
        env->set(n.name, Value::function(std::move(f)));
        return Flow::Normal;
      }
      case NodeKind::CallBlock: {
        const Value v = exec_call_block(n, env);
        if (!v.is_null() && !v.is_undefined()) append(out, output_string(v));
        return Flow::Normal;
      }
      case NodeKind::FilterBlock: {
        const Value body = make_string(render_body(n.body, env, "a filter block"));
        CallArgs args = eval_args(n.kids, 0, env);
        const Value v = apply_filter(body, n.name, n.flag, args, env);
        if (!v.is_null() && !v.is_undefined()) append(out, output_string(v));
        return Flow::Normal;
      }
      case NodeKind::Break: return Flow::Break;
      case NodeKind::Continue: return Flow::Continue;
      default: {
        const Value v = eval(n, env);
        if (!v.is_null() && !v.is_undefined()) append(out, output_string(v));
        return Flow::Normal;
      }
    }
  } catch (JinjaError& e) {
    if (e.pos == JinjaError::kNoPos) e.pos = n.pos;
    throw;
  }
}

void Interpreter::bind_target(const Node& target, const Value& v, Env& env) {
  if (target.kind == NodeKind::Ident) {
    env.set(target.name, v);
    return;
  }
  // A tuple of names: unpack a list.
  if (!v.is_array()) fail("cannot unpack " + a_kind(v) + " into " + std::to_string(target.kids.size()) + " names");
  if (v.items().size() != target.kids.size())
    fail(std::string("too ") + (target.kids.size() > v.items().size() ? "few" : "many") + " items to unpack (expected " +
         std::to_string(target.kids.size()) + ", got " + std::to_string(v.items().size()) + ")");
  for (size_t i = 0; i < target.kids.size(); ++i) {
    if (target.kids[i]->kind != NodeKind::Ident) fail("can only unpack into names", target.kids[i]->pos);
    env.set(target.kids[i]->name, v.items()[i]);
  }
}

Interpreter::Flow Interpreter::exec_for(const Node& n, const EnvPtr& env, std::string& out) {
  auto scope = std::make_shared<Env>();
  scope->parent = env;
  const Node& target = *n.kids[0];
  const Node& iter_node = *n.kids[1];
  const Node* test = nullptr;
  Value iterable;
  if (iter_node.kind == NodeKind::Select) {
    iterable = eval(*iter_node.kids[0], scope);
    test = iter_node.kids[1].get();
  } else {
    iterable = eval(iter_node, scope);
  }
  std::vector<Value> all;
  switch (iterable.kind) {
    case Kind::Array: all = iterable.items(); break;
    case Kind::Object:
      for (const auto& e : iterable.obj->entries) all.push_back(Value::string(e.first));
      break;
    case Kind::String:  // Jinja2 iterates the characters
      for (std::string_view ch : cp_split(iterable.s())) all.push_back(Value::string(std::string(ch)));
      break;
    case Kind::Undefined: break;  // Jinja2: an undefined value iterates as empty
    default: fail("cannot loop over " + a_kind(iterable), iter_node.pos);
  }
  charge(all.size() * sizeof(Value));
  std::vector<Value> items;
  if (test) {
    for (Value& v : all) {
      step();
      auto loop_scope = std::make_shared<Env>();
      loop_scope->parent = scope;
      bind_target(target, v, *loop_scope);
      if (eval(*test, loop_scope).truthy()) items.push_back(std::move(v));
    }
  } else {
    items = std::move(all);
  }
  bool no_iteration = true;
  const size_t count = items.size();
  for (size_t i = 0; i < count; ++i) {
    step();
    auto loop = std::make_shared<ObjectData>();
    const double len = static_cast<double>(count), idx = static_cast<double>(i);
    loop->entries.reserve(9);
    loop->add_new("index", Value::integer(idx + 1));
    loop->add_new("index0", Value::integer(idx));
    loop->add_new("revindex", Value::integer(len - idx));
    loop->add_new("revindex0", Value::integer(len - idx - 1));
    loop->add_new("first", Value::boolean(i == 0));
    loop->add_new("last", Value::boolean(i + 1 == count));
    loop->add_new("length", Value::integer(len));
    loop->add_new("previtem", i > 0 ? items[i - 1] : Value::undefined());
    loop->add_new("nextitem", i + 1 < count ? items[i + 1] : Value::undefined());
    scope->set("loop", Value::object(std::move(loop)));
    bind_target(target, items[i], *scope);
    // As @huggingface/jinja: what an iteration printed before a break or
    // continue is dropped, and such an iteration does not count as one.
    const size_t mark = out.size();
    const Flow f = exec_block(n.body, scope, out);
    if (f == Flow::Continue) {
      out.resize(mark);
      continue;
    }
    if (f == Flow::Break) {
      out.resize(mark);
      break;
    }
    no_iteration = false;
  }
  if (no_iteration) return exec_block(n.alt, scope, out);
  return Flow::Normal;
}

void Interpreter::exec_set(const Node& n, const EnvPtr& env) {
  const Node& target = *n.kids[0];
  const Value rhs = n.kids.size() > 1 ? eval(*n.kids[1], env) : make_string(render_body(n.body, env, "a set block"));
  switch (target.kind) {
    case NodeKind::Ident: env->set(target.name, rhs); return;
    case NodeKind::TupleLit: bind_target(target, rhs, *env); return;
    case NodeKind::Member: {
      const Value object = eval(*target.kids[0], env);
      if (object.kind != Kind::Namespace)
        fail("cannot set an attribute of " + a_kind(object) + " (only of a namespace())", target.pos);
      const Node& prop = *target.kids[1];
      if (prop.kind != NodeKind::Literal || !prop.value.is_string()) fail("cannot assign to this attribute", target.pos);
      object.obj->set(prop.value.s(), rhs);
      if (object.obj->depth > kMaxValueDepth) fail("a namespace is nested too deeply", target.pos);
      return;
    }
    default: fail("cannot assign to this expression", target.pos);
  }
}

void Interpreter::bind_macro_args(const Node& macro, const std::string& display, CallArgs& call, const EnvPtr& scope) {
  std::vector<std::pair<std::string, Value>> kwargs = call.kwargs;
  std::vector<std::pair<std::string, const Node*>> pending;
  for (size_t i = 0; i < macro.params.size(); ++i) {
    const Node& p = *macro.params[i];
    Value v;
    bool have = false;
    if (i < call.args.size()) {
      v = call.args[i];
      have = true;
    } else {
      for (auto it = kwargs.begin(); it != kwargs.end(); ++it)
        if (it->first == p.name) {
          v = it->second;
          kwargs.erase(it);
          have = true;
          break;
        }
    }
    if (!have && p.kind == NodeKind::KwArg) pending.emplace_back(p.name, p.kids[0].get());
    scope->set(p.name, have ? v : Value::undefined());
  }
  if (macro.uses_kwargs) {
    auto o = std::make_shared<ObjectData>();
    for (auto& [k, v] : kwargs) o->set(k, v);
    scope->set("kwargs", Value::object(std::move(o)));
  } else if (!kwargs.empty()) {
    fail("macro " + display + " takes no keyword argument '" + kwargs[0].first + "'");
  }
  if (macro.uses_varargs) {
    std::vector<Value> rest;
    for (size_t i = macro.params.size(); i < call.args.size(); ++i) rest.push_back(call.args[i]);
    scope->set("varargs", Value::array(std::move(rest)));
  } else if (call.args.size() > macro.params.size()) {
    fail("macro " + display + " takes at most " + std::to_string(macro.params.size()) + " argument(s)");
  }
  for (const auto& [name, dflt] : pending) scope->set(name, eval(*dflt, scope));
}

Value Interpreter::call_function(const Value& fnv, CallArgs& args, const EnvPtr& env) {
  const FunctionData& f = *fnv.fn;
  if (f.builtin) return f.builtin(*this, f.self, args);
  const Node& m = *f.macro;
  auto scope = std::make_shared<Env>();
  if (m.kind == NodeKind::Macro) {
    scope->parent = env;  // macros see their caller's variables, as in @huggingface/jinja
    bind_macro_args(m, "'" + m.name + "'", args, scope);
    return make_string(render_body(m.body, scope, "a macro"));
  }
  scope->parent = f.closure;  // `caller` of a call block: the block's own scope
  bind_macro_args(m, "caller", args, scope);
  return make_string(render_body(m.body, scope, "a call block"));
}

Value Interpreter::exec_call_block(const Node& n, const EnvPtr& env) {
  const Node& call = *n.kids[0];
  auto caller = std::make_shared<FunctionData>();
  caller->name = "caller";
  caller->macro = &n;
  caller->closure = env;
  captured_.push_back(env);
  CallArgs args = eval_args(call.kids, 1, env);
  const Value fn = eval(*call.kids[0], env);
  if (fn.kind != Kind::Function) fail("'" + call.kids[0]->name + "' is not a macro", call.pos);
  auto scope = std::make_shared<Env>();
  scope->parent = env;
  scope->set("caller", Value::function(std::move(caller)));
  return call_function(fn, args, scope);
}

// --- expressions -------------------------------------------------------------

Value Interpreter::eval(const Node& n, const EnvPtr& env) {
  step();
  DepthGuard guard(*this);
  try {
    switch (n.kind) {
      case NodeKind::Literal: return n.value;
      case NodeKind::Ident: {
        const Value* v = env->lookup(n.name);
        return v ? *v : Value::undefined();
      }
      case NodeKind::Member: return eval_member(n, env);
      case NodeKind::Call: return eval_call(n, env);
      case NodeKind::Binary: return eval_binary(n, env);
      case NodeKind::Unary: return eval_unary(n, env);
      case NodeKind::Filter: return eval_filter(n, 1, eval(*n.kids[0], env), env);
      case NodeKind::Test: return eval_test(n, env);
      case NodeKind::Ternary: return eval(*n.kids[eval(*n.kids[0], env).truthy() ? 1 : 2], env);
      case NodeKind::Select:
        return eval(*n.kids[1], env).truthy() ? eval(*n.kids[0], env) : Value::undefined();
      case NodeKind::ArrayLit:
      case NodeKind::TupleLit: {
        std::vector<Value> items;
        for (const NodePtr& k : n.kids) items.push_back(eval(*k, env));
        charge(items.size() * sizeof(Value));
        return Value::array(std::move(items), n.kind == NodeKind::TupleLit);
      }
      case NodeKind::ObjectLit: {
        auto o = std::make_shared<ObjectData>();
        for (size_t i = 0; i + 1 < n.kids.size(); i += 2) {
          const Value k = eval(*n.kids[i], env);
          if (!k.is_string()) fail(std::string("dict keys must be strings, not ") + kind_name(k), n.kids[i]->pos);
          o->set(k.s(), eval(*n.kids[i + 1], env));
        }
        charge(sizeof(ObjectData) + o->entries.size() * (sizeof(Value) + 32));
        if (o->depth > kMaxValueDepth) fail("a dict is nested too deeply");
        return Value::object(std::move(o));
      }
      case NodeKind::KwArg: fail("a keyword argument outside a call");
      case NodeKind::Spread:
      case NodeKind::KwSpread: fail("argument unpacking outside a call");
      case NodeKind::Slice: fail("a slice outside '[ ]'");
      default: fail("a statement where an expression was expected");
    }
  } catch (JinjaError& e) {
    if (e.pos == JinjaError::kNoPos) e.pos = n.pos;
    throw;
  }
}

CallArgs Interpreter::eval_args(const std::vector<NodePtr>& nodes, size_t first, const EnvPtr& env) {
  CallArgs c;
  for (size_t i = first; i < nodes.size(); ++i) {
    const Node& a = *nodes[i];
    if (a.kind == NodeKind::Spread) {
      const Value v = eval(*a.kids[0], env);
      if (!v.is_array()) fail("cannot unpack " + a_kind(v) + " with '*'", a.pos);
      for (const Value& x : v.items()) c.args.push_back(x);
    } else if (a.kind != NodeKind::KwArg && a.kind != NodeKind::KwSpread) {
      c.args.push_back(eval(a, env));
    }
  }
  auto add_kw = [&](const std::string& k, Value v, uint32_t pos) {
    if (c.kwarg(k)) fail("keyword argument '" + k + "' given twice", pos);
    c.kwargs.emplace_back(k, std::move(v));
  };
  for (size_t i = first; i < nodes.size(); ++i) {
    const Node& a = *nodes[i];
    if (a.kind == NodeKind::KwArg) {
      add_kw(a.name, eval(*a.kids[0], env), a.pos);
    } else if (a.kind == NodeKind::KwSpread) {
      const Value v = eval(*a.kids[0], env);
      if (v.kind != Kind::Object) fail("'**' needs a dict, not " + a_kind(v), a.pos);
      for (const auto& [k, x] : v.obj->entries) add_kw(k, x, a.pos);
    }
  }
  return c;
}

Value Interpreter::eval_call(const Node& n, const EnvPtr& env) {
  CallArgs args = eval_args(n.kids, 1, env);
  const Value fn = eval(*n.kids[0], env);
  if (fn.kind != Kind::Function) {
    const Node& callee = *n.kids[0];
    if (callee.kind == NodeKind::Ident && fn.is_undefined()) fail("'" + callee.name + "' is undefined, not a function");
    fail("cannot call " + a_kind(fn));
  }
  return call_function(fn, args, env);
}

Value Interpreter::eval_member(const Node& n, const EnvPtr& env) {
  const Value object = eval(*n.kids[0], env);
  const Node& prop_node = *n.kids[1];
  if (prop_node.kind == NodeKind::Slice) return eval_slice(object, prop_node, env);
  const Value prop = eval(prop_node, env);
  switch (object.kind) {
    case Kind::Object:
    case Kind::Namespace: {
      if (!prop.is_string()) fail("cannot index " + a_kind(object) + " with " + a_kind(prop));
      if (const Value* v = object.obj->find(prop.s())) return *v;
      if (object.kind == Kind::Object)
        if (Builtin m = find_method(kObjectMethods, prop.s())) return Value::function(builtin(prop.s(), m, object));
      return Value::undefined();
    }
    case Kind::Array:
    case Kind::String: {
      if (prop.kind == Kind::Int) {
        if (object.is_array()) {
          const int64_t i = resolve_index(prop.num, object.items().size());
          return i < 0 ? Value::undefined() : object.items()[static_cast<size_t>(i)];
        }
        const auto cps = cp_split(object.s());
        const int64_t i = resolve_index(prop.num, cps.size());
        return i < 0 ? Value::undefined() : Value::string(std::string(cps[static_cast<size_t>(i)]));
      }
      if (!prop.is_string()) fail("cannot index " + a_kind(object) + " with " + a_kind(prop));
      if (prop.s() == "length")
        return Value::integer(static_cast<double>(object.is_array() ? object.items().size() : cp_count(object.s())));
      if (object.is_string())
        if (Builtin m = find_method(kStringMethods, prop.s())) return Value::function(builtin(prop.s(), m, object));
      return Value::undefined();
    }
    default:
      if (!prop.is_string()) fail("cannot index " + a_kind(object) + " with " + a_kind(prop));
      return Value::undefined();
  }
}

Value Interpreter::eval_slice(const Value& object, const Node& slice, const EnvPtr& env) {
  if (!object.is_array() && !object.is_string()) fail("cannot slice " + a_kind(object));
  Value part[3];
  for (int i = 0; i < 3; ++i) {
    if (!slice.kids[i]) continue;
    part[i] = eval(*slice.kids[i], env);
    if (part[i].kind != Kind::Int && !part[i].is_undefined())
      fail(std::string("slice indices must be integers, not ") + kind_name(part[i]), slice.kids[i]->pos);
  }
  if (object.is_array()) {
    const auto idx = slice_indices(object.items().size(), part[0], part[1], part[2]);
    std::vector<Value> out;
    out.reserve(idx.size());
    for (size_t i : idx) out.push_back(object.items()[i]);
    return make_array(std::move(out));
  }
  const auto cps = cp_split(object.s());
  std::string out;
  for (size_t i : slice_indices(cps.size(), part[0], part[1], part[2])) out += cps[i];
  return make_string(std::move(out));
}

Value Interpreter::eval_unary(const Node& n, const EnvPtr& env) {
  const Value v = eval(*n.kids[0], env);
  if (n.name == "not") return Value::boolean(!v.truthy());
  const double sign = n.name == "-" ? -1 : 1;
  if (v.is_number()) return v.kind == Kind::Float ? Value::floating(sign * v.num) : Value::integer(sign * v.num);
  if (v.kind == Kind::Bool) return Value::integer(sign * (v.b ? 1 : 0));
  fail("unary '" + n.name + "' needs a number, not " + a_kind(v));
}

Value Interpreter::eval_binary(const Node& n, const EnvPtr& env) {
  const std::string& op = n.name;
  const Value left = eval(*n.kids[0], env);
  if (op == "and") return left.truthy() ? eval(*n.kids[1], env) : left;
  if (op == "or") return left.truthy() ? left : eval(*n.kids[1], env);
  const Value right = eval(*n.kids[1], env);
  if (op == "==") return Value::boolean(loose_equals(left, right));
  if (op == "!=") return Value::boolean(!loose_equals(left, right));
  const bool in_op = op == "in" || op == "not in";
  if (op == "~" && !left.is_null() && !right.is_null()) {
    // Jinja2 prints an undefined operand of ~ as nothing.
    const std::string a = left.is_undefined() ? "" : js_string(left);
    const std::string b = right.is_undefined() ? "" : js_string(right);
    return make_string(a + b);
  }
  if (left.is_undefined() || right.is_undefined()) {
    if (right.is_undefined() && in_op) return Value::boolean(op == "not in");
    const Node& culprit = left.is_undefined() ? *n.kids[0] : *n.kids[1];
    if (culprit.kind == NodeKind::Ident) fail("'" + culprit.name + "' is undefined (in '" + op + "')", culprit.pos);
    fail("cannot apply '" + op + "' to an undefined value");
  }
  if (left.is_null() || right.is_null()) fail("cannot apply '" + op + "' to none");
  auto numeric_like = [](const Value& v) { return v.is_number() || v.kind == Kind::Bool; };
  if (op == "**" && numeric_like(left) && numeric_like(right)) {
    const double a = left.kind == Kind::Bool ? left.b : left.num, b = right.kind == Kind::Bool ? right.b : right.num;
    if (a == 0 && b < 0) fail("0 cannot be raised to a negative power");
    const double r = std::pow(a, b);
    if (!std::isfinite(r)) fail("'**' gave a result that is not a finite number");
    const bool is_float = left.kind == Kind::Float || right.kind == Kind::Float || b < 0;
    return is_float ? Value::floating(r) : Value::integer(r);
  }
  if (left.is_number() && right.is_number()) {
    const double a = left.num, b = right.num;
    const bool is_float = left.kind == Kind::Float || right.kind == Kind::Float;
    auto num = [&](double r) { return is_float ? Value::floating(r) : Value::integer(r); };
    if (op == "+") return num(a + b);
    if (op == "-") return num(a - b);
    if (op == "*") return num(a * b);
    if (op == "/") return Value::floating(a / b);
    if (op == "//") return num(std::floor(a / b));
    if (op == "%") return num(std::fmod(a, b));
    if (op == "<") return Value::boolean(a < b);
    if (op == ">") return Value::boolean(a > b);
    if (op == "<=") return Value::boolean(a <= b);
    if (op == ">=") return Value::boolean(a >= b);
  } else if (left.is_array() && right.is_array()) {
    if (op == "+") {
      std::vector<Value> items = left.items();
      items.insert(items.end(), right.items().begin(), right.items().end());
      return make_array(std::move(items));
    }
  } else if (right.is_array() && in_op) {
    bool found = false;
    for (const Value& x : right.items())
      if (strict_equals(x, left)) {
        found = true;
        break;
      }
    return Value::boolean(found == (op == "in"));
  }
  if ((left.is_string() || right.is_string()) && op == "+") return make_string(js_string(left) + js_string(right));
  if (left.is_string() && right.is_string()) {
    if (in_op) return Value::boolean((right.s().find(left.s()) != std::string::npos) == (op == "in"));
    // Jinja2 compares strings; @huggingface/jinja does not.
    const int c = left.s().compare(right.s());
    if (op == "<") return Value::boolean(c < 0);
    if (op == ">") return Value::boolean(c > 0);
    if (op == "<=") return Value::boolean(c <= 0);
    if (op == ">=") return Value::boolean(c >= 0);
  }
  if (left.is_string() && right.kind == Kind::Object && in_op)
    return Value::boolean((right.obj->find(left.s()) != nullptr) == (op == "in"));
  fail("unsupported operand types for '" + op + "': " + kind_name(left) + " and " + kind_name(right));
}

Value Interpreter::eval_filter(const Node& n, size_t first_arg, const Value& operand, const EnvPtr& env) {
  if ((n.name == "selectattr" || n.name == "rejectattr") && n.flag) {
    for (size_t i = first_arg; i < n.kids.size(); ++i)
      if (n.kids[i]->kind != NodeKind::Literal || !n.kids[i]->value.is_string())
        fail("the arguments of " + n.name + " must be string literals", n.kids[i]->pos);
  }
  CallArgs args = eval_args(n.kids, first_arg, env);
  return apply_filter(operand, n.name, n.flag, args, env);
}

Value Interpreter::eval_test(const Node& n, const EnvPtr& env) {
  const Value operand = eval(*n.kids[0], env);
  CallArgs args = eval_args(n.kids, 1, env);
  const bool r = run_test(n.name, operand, args.args);
  return Value::boolean(n.flag ? !r : r);
}

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

Value Interpreter::apply_filter(const Value& v, const std::string& name, bool parens, CallArgs& c, const EnvPtr& env) {
  const bool known = known_filters().count(name) > 0;
  auto unknown = [&]() -> Value {
    if (!known) fail("unknown filter '" + name + "'");
    fail("the filter '" + name + "' cannot be applied to " + a_kind(v));
  };
  static const Value kUndef, kFalse = Value::boolean(false), kEmpty = Value::string("");

  // Filters for any value, with or without arguments.
  if (name == "safe") return v;
  if (name == "tojson") {
    JsonOptions opt;
    if (parens) {
      if (const Value* indent = c.kwarg("indent"); indent && !indent->is_null()) {
        if (indent->kind != Kind::Int) fail("tojson: indent must be an integer");
        if (!(indent->num >= 0 && indent->num <= 1000)) fail("tojson: indent out of range");
        opt.indent = static_cast<int>(indent->num);
      }
      if (const Value* a = c.kwarg("ensure_ascii")) {
        if (a->kind != Kind::Bool) fail("tojson: ensure_ascii must be a boolean");
        opt.ensure_ascii = a->b;
      }
      if (const Value* a = c.kwarg("sort_keys")) {
        if (a->kind != Kind::Bool) fail("tojson: sort_keys must be a boolean");
        opt.sort_keys = a->b;
      }
      if (const Value* s = c.kwarg("separators"); s && !s->is_null()) {
        if (!s->is_array() || s->items().size() != 2 || !s->items()[0].is_string() || !s->items()[1].is_string())
          fail("tojson: separators must be a pair of strings");
        opt.has_separators = true;
        opt.item_sep = s->items()[0].s();
        opt.key_sep = s->items()[1].s();
      }
    }
    return make_string(to_json(v, opt));
  }
  if (name == "default" || name == "d") {
    const Value& dflt = c.args.empty() ? kEmpty : c.args[0];
    const Value& boolean = arg_or(c, 1, "boolean", kFalse);
    if (boolean.kind != Kind::Bool) fail("default: the boolean flag must be a boolean");
    if (v.is_undefined() || (boolean.b && !v.truthy())) return dflt;
    return v;
  }
  if (parens && (name == "int" || name == "float")) {
    const Value fallback = name == "int" ? Value::integer(0) : Value::floating(0);
    const Value& dflt = arg_or(c, 0, "default", fallback);
    if (v.is_string()) {
      const double x = js_parse_number(v.s(), name == "int");
      if (std::isnan(x)) return dflt;
      return name == "int" ? Value::integer(x) : Value::floating(x);
    }
    if (v.is_number()) return v;
    if (v.kind == Kind::Bool) return name == "int" ? Value::integer(v.b) : Value::floating(v.b);
    return unknown();
  }
  if (parens && name == "join") {
    const Value& sep = arg_or(c, 0, "separator", kEmpty);
    if (!sep.is_string()) fail("join: the separator must be a string");
    std::vector<std::string> parts;
    if (v.is_string()) {
      for (std::string_view ch : cp_split(v.s())) parts.emplace_back(ch);
    } else if (v.is_array()) {
      for (const Value& x : v.items()) parts.push_back(x.is_null() || x.is_undefined() ? "" : js_string(x));
    } else if (v.is_undefined()) {
      return kEmpty;
    } else {
      return unknown();
    }
    size_t total = 0;
    for (const auto& p : parts) total += p.size() + sep.s().size();
    charge(total);
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep.s() : "") + parts[i];
    return make_string(std::move(out));
  }

  // Arguments given to a filter that takes none: allowed when empty, e.g. |length().
  if (parens && c.args.empty() && c.kwargs.empty() &&
      (name != "sort" && name != "map" && name != "indent" && name != "replace" && name != "selectattr" &&
       name != "rejectattr" && name != "select" && name != "reject" && name != "dictsort")) {
    parens = false;
  }

  switch (v.kind) {
    case Kind::Array: {
      const auto& items = v.items();
      if (!parens) {
        if (name == "list") return v;
        if (name == "first") return items.empty() ? Value::undefined() : items.front();
        if (name == "last") return items.empty() ? Value::undefined() : items.back();
        if (name == "length" || name == "count") return Value::integer(static_cast<double>(items.size()));
        if (name == "reverse") return make_array(std::vector<Value>(items.rbegin(), items.rend()));
        if (name == "join") {
          std::string out;
          for (const Value& x : items) out += x.is_null() || x.is_undefined() ? "" : js_string(x);
          return make_string(std::move(out));
        }
        if (name == "string") {
          JsonOptions opt;
          opt.undefined_as_null = false;
          return make_string(to_json(v, opt));
        }
        if (name == "unique") {
          std::vector<Value> out;
          for (const Value& x : items) {
            bool seen = false;
            for (const Value& y : out)
              if (strict_equals(x, y) || (x.is_number() && y.is_number() && std::isnan(x.num) && std::isnan(y.num))) {
                seen = true;
                break;
              }
            if (!seen) out.push_back(x);
            step();
          }
          return make_array(std::move(out));
        }
      }
      if (name == "sort") {
        const Value& rev = arg_or(c, 0, "reverse", kFalse);
        const Value& cs = arg_or(c, 1, "case_sensitive", kFalse);
        static const Value kNone = Value::null();
        const Value& attr = arg_or(c, 2, "attribute", kNone);
        if (rev.kind != Kind::Bool) fail("sort: reverse must be a boolean");
        if (cs.kind != Kind::Bool) fail("sort: case_sensitive must be a boolean");
        if (!attr.is_string() && attr.kind != Kind::Int && !attr.is_null())
          fail("sort: attribute must be a string, an integer or none");
        auto key = [&](const Value& x) {
          if (attr.is_null()) return x;
          return attribute_path(x, attr.is_string() ? attr.s() : js_number(attr.num));
        };
        std::vector<Value> out = items;
        charge(out.size() * sizeof(Value));
        merge_sort(out, [&](const Value& a, const Value& b) {
          step();
          const int r = compare_values(key(a), key(b), cs.b);
          return rev.b ? r > 0 : r < 0;
        });
        return Value::array(std::move(out));
      }
      if (parens && (name == "selectattr" || name == "rejectattr")) {
        for (const Value& x : items)
          if (!is_mapping(x)) fail(name + " can only be applied to a list of dicts");
        if (c.args.empty()) fail(name + " needs an attribute name");
        const std::string attr = c.args[0].s();
        const std::string test = c.args.size() > 1 ? c.args[1].s() : "";
        std::vector<Value> test_args(c.args.begin() + std::min<size_t>(2, c.args.size()), c.args.end());
        const bool select = name == "selectattr";
        std::vector<Value> out;
        for (const Value& x : items) {
          step();
          const Value* a = x.obj->find(attr);
          const bool r = a ? (test.empty() ? a->truthy() : run_test(test, *a, test_args)) : false;
          if (r == select) out.push_back(x);
        }
        return make_array(std::move(out));
      }
      if (parens && (name == "select" || name == "reject")) {
        // Jinja2's select/reject: keep the items passing a test (truthy ones without).
        std::vector<Value> test_args(c.args.begin() + std::min<size_t>(1, c.args.size()), c.args.end());
        if (!c.args.empty() && !c.args[0].is_string()) fail(name + ": the test name must be a string");
        const std::string test = c.args.empty() ? "" : c.args[0].s();
        std::vector<Value> out;
        for (const Value& x : items) {
          step();
          const bool r = test.empty() ? x.truthy() : run_test(test, x, test_args);
          if (r == (name == "select")) out.push_back(x);
        }
        return make_array(std::move(out));
      }
      if (parens && name == "map") {
        std::vector<Value> out;
        if (const Value* attr = c.kwarg("attribute")) {
          if (!attr->is_string()) fail("map: attribute must be a string");
          const Value* dflt = c.kwarg("default");
          for (const Value& x : items) {
            step();
            if (!is_mapping(x)) fail("map(attribute=...) needs a list of dicts");
            Value r = attribute_path(x, attr->s());
            out.push_back(r.is_undefined() && dflt ? *dflt : r);
          }
          return make_array(std::move(out));
        }
        // Jinja2's map('filter', args...): apply a filter to each item.
        if (c.args.empty() || !c.args[0].is_string()) fail("map needs attribute=... or a filter name");
        const std::string filter = c.args[0].s();
        if (filter == "map") fail("map cannot map map");
        CallArgs inner;
        inner.args.assign(c.args.begin() + 1, c.args.end());
        inner.kwargs = c.kwargs;
        const bool inner_parens = !inner.args.empty() || !inner.kwargs.empty();
        for (const Value& x : items) {
          step();
          out.push_back(apply_filter(x, filter, inner_parens, inner, env));
        }
        return make_array(std::move(out));
      }
      return unknown();
    }
    case Kind::String: {
      const std::string& s = v.s();
      if (!parens) {
        if (name == "length" || name == "count") return Value::integer(static_cast<double>(cp_count(s)));
        if (name == "upper") return make_string(to_upper(s));
        if (name == "lower") return make_string(to_lower(s));
        if (name == "title") return make_string(title_case(s));
        if (name == "capitalize") return make_string(capitalize(s));
        if (name == "trim") return make_string(std::string(js_trim(s)));
        if (name == "join" || name == "string") return v;
        if (name == "int" || name == "float") {
          CallArgs none;
          return apply_filter(v, name, true, none, env);
        }
        if (name == "list") {
          std::vector<Value> out;
          for (std::string_view ch : cp_split(s)) out.push_back(Value::string(std::string(ch)));
          return make_array(std::move(out));
        }
        if (name == "first" || name == "last") {
          const auto cps = cp_split(s);
          if (cps.empty()) return Value::undefined();
          return Value::string(std::string(name == "first" ? cps.front() : cps.back()));
        }
        if (name == "reverse") {
          auto cps = cp_split(s);
          std::string out;
          for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
          return make_string(std::move(out));
        }
      }
      if (name == "indent") {
        static const Value kFour = Value::integer(4);
        const Value& width = arg_or(c, 0, "width", kFour);
        const Value& first = arg_or(c, 1, "first", kFalse);
        const Value& blank = arg_or(c, 2, "blank", kFalse);
        std::string pad;
        if (width.kind == Kind::Int) {
          if (!(width.num >= 0 && width.num <= 1000)) fail("indent: width out of range");
          pad.assign(static_cast<size_t>(width.num), ' ');
        } else if (width.is_string()) {
          pad = width.s();  // Jinja2 indents by a string too
        } else {
          fail("indent: width must be a number");
        }
        size_t lines = 1;
        for (char ch : s) lines += ch == '\n';
        charge(lines * pad.size());
        std::string out;
        size_t start = 0, line = 0;
        while (true) {
          const size_t nl = s.find('\n', start);
          const std::string_view l = std::string_view(s).substr(start, nl == std::string::npos ? std::string::npos : nl - start);
          const bool skip = (line == 0 && !first.truthy()) || (l.empty() && !blank.truthy());
          if (!skip) out += pad;
          out += l;
          if (nl == std::string::npos) break;
          out += '\n';
          start = nl + 1;
          ++line;
        }
        return make_string(std::move(out));
      }
      if (name == "replace") return sm_replace(*this, v, c);
      return unknown();
    }
    case Kind::Int:
    case Kind::Float:
      if (!parens) {
        if (name == "abs") return v.kind == Kind::Int ? Value::integer(std::fabs(v.num)) : Value::floating(std::fabs(v.num));
        if (name == "int") return Value::integer(std::floor(v.num));
        if (name == "float") return Value::floating(v.num);
        if (name == "string") return make_string(output_string(v));
      }
      return unknown();
    case Kind::Object: {
      if (!parens) {
        if (name == "items") return om_items(*this, v, c);
        if (name == "length" || name == "count") return Value::integer(static_cast<double>(v.obj->entries.size()));
        if (name == "list") return om_keys(*this, v, c);
      }
      if (Builtin m = find_method(kObjectMethods, name)) return m(*this, v, c);
      return unknown();
    }
    case Kind::Bool:
      if (!parens) {
        if (name == "bool") return v;
        if (name == "int") return Value::integer(v.b);
        if (name == "float") return Value::floating(v.b);
        if (name == "string") return make_string(v.b ? "true" : "false");
      }
      return unknown();
    case Kind::Undefined:
      // Jinja2 treats an undefined value as an empty string / empty list here.
      if (name == "string" || name == "trim" || name == "upper" || name == "lower" || name == "title" ||
          name == "capitalize" || name == "indent" || name == "join" || name == "replace")
        return kEmpty;
      if (name == "length" || name == "count") return Value::integer(0);
      if (name == "list" || name == "items" || name == "sort" || name == "reverse" || name == "unique" ||
          name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject" || name == "map")
        return make_array({});
      if (name == "first" || name == "last") return kUndef;
      return unknown();
    default:
      return unknown();
  }
}

}  // namespace th::jinja
