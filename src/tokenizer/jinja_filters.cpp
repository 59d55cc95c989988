// The filters of the chat-template language ('x | upper'), as
// @huggingface/jinja has them with Jinja2's additions (select, map('filter'),
// indent by a string). Interpreter::apply_filter first tries the filters
// that take any value, then hands over by the kind of the value: a filter's
// meaning depends on both its name and what it is applied to.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_interpreter.h"

namespace th::jinja {

namespace {

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

const std::set<std::string, std::less<>>& known_filters() {
  static const std::set<std::string, std::less<>> k = {
      "abs", "bool", "capitalize", "default", "dictsort", "first", "float", "indent", "int", "items", "join",
      "keys", "last", "length", "list", "lower", "map", "reject", "rejectattr", "replace", "reverse",
      "safe", "select", "selectattr", "sort", "string", "tojson", "title", "trim", "unique", "upper",
      "values", "get", "count", "d",
  };
  return k;
}

const Value& false_value() {
  static const Value v = Value::boolean(false);
  return v;
}
const Value& empty_string() {
  static const Value v = Value::string("");
  return v;
}

// One filter application: what each filter function sees.
struct FilterCall {
  Interpreter& in;
  const Value& v;
  const std::string& name;
  bool parens;  // written with ( ), and (after apply_filter's first steps) with arguments
  CallArgs& c;
  const EnvPtr& env;

  [[noreturn]] Value unknown() const {
    if (known_filters().count(name) == 0) fail("unknown filter '" + name + "'");
    fail("the filter '" + name + "' cannot be applied to " + a_kind(v));
  }
};

// --- filters for any value ---------------------------------------------------

Value safe_filter(FilterCall& f) { return f.v; }

Value tojson_filter(FilterCall& f) {
  CallArgs& c = f.c;
  JsonOptions opt;
  if (f.parens) {
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
  return f.in.make_string(to_json(f.v, opt));
}

Value default_filter(FilterCall& f) {
  const Value& v = f.v;
  CallArgs& c = f.c;
  const Value& dflt = c.args.empty() ? empty_string() : c.args[0];
  const Value& boolean = arg_or(c, 1, "boolean", false_value());
  if (boolean.kind != Kind::Bool) fail("default: the boolean flag must be a boolean");
  if (v.is_undefined() || (boolean.b && !v.truthy())) return dflt;
  return v;
}

// int(default) and float(default), written with parentheses.
Value number_filter_with_default(FilterCall& f) {
  const Value& v = f.v;
  const bool to_int = f.name == "int";
  const Value fallback = to_int ? Value::integer(0) : Value::floating(0);
  const Value& dflt = arg_or(f.c, 0, "default", fallback);
  if (v.is_string()) {
    const double x = js_parse_number(v.s(), to_int);
    if (std::isnan(x)) return dflt;
    return to_int ? Value::integer(x) : Value::floating(x);
  }
  if (v.is_number()) return v;
  if (v.kind == Kind::Bool) return to_int ? Value::integer(v.b) : Value::floating(v.b);
  return f.unknown();
}

// join(separator), written with parentheses.
Value join_filter_with_separator(FilterCall& f) {
  const Value& v = f.v;
  const Value& sep = arg_or(f.c, 0, "separator", empty_string());
  if (!sep.is_string()) fail("join: the separator must be a string");
  std::vector<std::string> parts;
  if (v.is_string()) {
    for (std::string_view ch : cp_split(v.s())) parts.emplace_back(ch);
  } else if (v.is_array()) {
    for (const Value& x : v.items()) parts.push_back(x.is_null() || x.is_undefined() ? "" : js_string(x));
  } else if (v.is_undefined()) {
    return empty_string();
  } else {
    return f.unknown();
  }
  size_t total = 0;
  for (const auto& p : parts) total += p.size() + sep.s().size();
  f.in.charge(total);
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep.s() : "") + parts[i];
  return f.in.make_string(std::move(out));
}

struct AnyValueFilter {
  const char* name;
  bool needs_parens;  // only this form takes any value; without ( ) it goes by kind
  Value (*fn)(FilterCall&);
};
const AnyValueFilter kAnyValueFilters[] = {
    {"safe", false, safe_filter},
    {"tojson", false, tojson_filter},
    {"default", false, default_filter},
    {"d", false, default_filter},
    {"int", true, number_filter_with_default},
    {"float", true, number_filter_with_default},
    {"join", true, join_filter_with_separator},
};

// --- filters on lists --------------------------------------------------------

// The list filters that take no arguments.
bool plain_array_filter(FilterCall& f, Value* result) {
  Interpreter& in = f.in;
  const Value& v = f.v;
  const std::string& name = f.name;
  const auto& items = v.items();
  if (name == "list") {
    *result = v;
  } else if (name == "first") {
    *result = items.empty() ? Value::undefined() : items.front();
  } else if (name == "last") {
    *result = items.empty() ? Value::undefined() : items.back();
  } else if (name == "length" || name == "count") {
    *result = Value::integer(static_cast<double>(items.size()));
  } else if (name == "reverse") {
    *result = in.make_array(std::vector<Value>(items.rbegin(), items.rend()));
  } else if (name == "join") {
    std::string out;
    for (const Value& x : items) out += x.is_null() || x.is_undefined() ? "" : js_string(x);
    *result = in.make_string(std::move(out));
  } else if (name == "string") {
    JsonOptions opt;
    opt.undefined_as_null = false;
    *result = in.make_string(to_json(v, opt));
  } else if (name == "unique") {
    std::vector<Value> out;
    for (const Value& x : items) {
      bool seen = false;
      for (const Value& y : out)
        if (strict_equals(x, y) || (x.is_number() && y.is_number() && std::isnan(x.num) && std::isnan(y.num))) {
          seen = true;
          break;
        }
      if (!seen) out.push_back(x);
      in.step();
    }
    *result = in.make_array(std::move(out));
  } else {
    return false;
  }
  return true;
}

Value sort_filter(FilterCall& f) {
  Interpreter& in = f.in;
  CallArgs& c = f.c;
  const Value& rev = arg_or(c, 0, "reverse", false_value());
  const Value& cs = arg_or(c, 1, "case_sensitive", false_value());
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
  std::vector<Value> out = f.v.items();
  in.charge(out.size() * sizeof(Value));
  merge_sort(out, [&](const Value& a, const Value& b) {
    in.step();
    const int r = compare_values(key(a), key(b), cs.b);
    return rev.b ? r > 0 : r < 0;
  });
  return Value::array(std::move(out));
}

// selectattr / rejectattr(attribute, test, test arguments...).
Value selectattr_filter(FilterCall& f) {
  Interpreter& in = f.in;
  CallArgs& c = f.c;
  const std::string& name = f.name;
  const auto& items = f.v.items();
  for (const Value& x : items)
    if (!is_mapping(x)) fail(name + " can only be applied to a list of dicts");
  if (c.args.empty()) fail(name + " needs an attribute name");
  const std::string attr = c.args[0].s();
  const std::string test = c.args.size() > 1 ? c.args[1].s() : "";
  std::vector<Value> test_args(c.args.begin() + std::min<size_t>(2, c.args.size()), c.args.end());
  const bool select = name == "selectattr";
  std::vector<Value> out;
  for (const Value& x : items) {
    in.step();
    const Value* a = x.obj->find(attr);
    const bool r = a ? (test.empty() ? a->truthy() : in.run_test(test, *a, test_args)) : false;
    if (r == select) out.push_back(x);
  }
  return in.make_array(std::move(out));
}

// Jinja2's select/reject: keep the items passing a test (truthy ones without).
Value select_filter(FilterCall& f) {
  Interpreter& in = f.in;
  CallArgs& c = f.c;
  const std::string& name = f.name;
  std::vector<Value> test_args(c.args.begin() + std::min<size_t>(1, c.args.size()), c.args.end());
  if (!c.args.empty() && !c.args[0].is_string()) fail(name + ": the test name must be a string");
  const std::string test = c.args.empty() ? "" : c.args[0].s();
  std::vector<Value> out;
  for (const Value& x : f.v.items()) {
    in.step();
    const bool r = test.empty() ? x.truthy() : in.run_test(test, x, test_args);
    if (r == (name == "select")) out.push_back(x);
  }
  return in.make_array(std::move(out));
}

// map(attribute=..., default=...), or Jinja2's map('filter', args...).
Value map_filter(FilterCall& f) {
  Interpreter& in = f.in;
  CallArgs& c = f.c;
  const auto& items = f.v.items();
  std::vector<Value> out;
  if (const Value* attr = c.kwarg("attribute")) {
    if (!attr->is_string()) fail("map: attribute must be a string");
    const Value* dflt = c.kwarg("default");
    for (const Value& x : items) {
      in.step();
      if (!is_mapping(x)) fail("map(attribute=...) needs a list of dicts");
      Value r = attribute_path(x, attr->s());
      out.push_back(r.is_undefined() && dflt ? *dflt : r);
    }
    return in.make_array(std::move(out));
  }
  if (c.args.empty() || !c.args[0].is_string()) fail("map needs attribute=... or a filter name");
  const std::string filter = c.args[0].s();
  if (filter == "map") fail("map cannot map map");
  CallArgs inner;
  inner.args.assign(c.args.begin() + 1, c.args.end());
  inner.kwargs = c.kwargs;
  const bool inner_parens = !inner.args.empty() || !inner.kwargs.empty();
  for (const Value& x : items) {
    in.step();
    out.push_back(in.apply_filter(x, filter, inner_parens, inner, f.env));
  }
  return in.make_array(std::move(out));
}

Value array_filter(FilterCall& f) {
  const std::string& name = f.name;
  if (Value r; !f.parens && plain_array_filter(f, &r)) return r;
  if (name == "sort") return sort_filter(f);
  if (f.parens && (name == "selectattr" || name == "rejectattr")) return selectattr_filter(f);
  if (f.parens && (name == "select" || name == "reject")) return select_filter(f);
  if (f.parens && name == "map") return map_filter(f);
  return f.unknown();
}

// --- filters on strings ------------------------------------------------------

// The string filters that take no arguments.
bool plain_string_filter(FilterCall& f, Value* result) {
  Interpreter& in = f.in;
  const Value& v = f.v;
  const std::string& name = f.name;
  const std::string& s = v.s();
  if (name == "length" || name == "count") {
    *result = Value::integer(static_cast<double>(cp_count(s)));
  } else if (name == "upper") {
    *result = in.make_string(to_upper(s));
  } else if (name == "lower") {
    *result = in.make_string(to_lower(s));
  } else if (name == "title") {
    *result = in.make_string(title_case(s));
  } else if (name == "capitalize") {
    *result = in.make_string(capitalize(s));
  } else if (name == "trim") {
    *result = in.make_string(std::string(js_trim(s)));
  } else if (name == "join" || name == "string") {
    *result = v;
  } else if (name == "int" || name == "float") {
    CallArgs none;
    *result = in.apply_filter(v, name, true, none, f.env);
  } else if (name == "list") {
    std::vector<Value> out;
    for (std::string_view ch : cp_split(s)) out.push_back(Value::string(std::string(ch)));
    *result = in.make_array(std::move(out));
  } else if (name == "first" || name == "last") {
    const auto cps = cp_split(s);
    *result = cps.empty() ? Value::undefined() : Value::string(std::string(name == "first" ? cps.front() : cps.back()));
  } else if (name == "reverse") {
    auto cps = cp_split(s);
    std::string out;
    for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
    *result = in.make_string(std::move(out));
  } else {
    return false;
  }
  return true;
}

// indent(width=4, first=false, blank=false).
Value indent_filter(FilterCall& f) {
  CallArgs& c = f.c;
  const std::string& s = f.v.s();
  static const Value kFour = Value::integer(4);
  const Value& width = arg_or(c, 0, "width", kFour);
  const Value& first = arg_or(c, 1, "first", false_value());
  const Value& blank = arg_or(c, 2, "blank", false_value());
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
  f.in.charge(lines * pad.size());
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
  return f.in.make_string(std::move(out));
}

Value string_filter(FilterCall& f) {
  if (Value r; !f.parens && plain_string_filter(f, &r)) return r;
  if (f.name == "indent") return indent_filter(f);
  if (f.name == "replace") return find_string_method("replace")(f.in, f.v, f.c);
  return f.unknown();
}

// --- filters on numbers, dicts, booleans and undefined -------------------------

Value number_filter(FilterCall& f) {
  const Value& v = f.v;
  const std::string& name = f.name;
  if (!f.parens) {
    if (name == "abs") return v.kind == Kind::Int ? Value::integer(std::fabs(v.num)) : Value::floating(std::fabs(v.num));
    if (name == "int") return Value::integer(std::floor(v.num));
    if (name == "float") return Value::floating(v.num);
    if (name == "string") return f.in.make_string(output_string(v));
  }
  return f.unknown();
}

Value object_filter(FilterCall& f) {
  const std::string& name = f.name;
  if (!f.parens) {
    if (name == "items") return find_object_method("items")(f.in, f.v, f.c);
    if (name == "length" || name == "count") return Value::integer(static_cast<double>(f.v.obj->entries.size()));
    if (name == "list") return find_object_method("keys")(f.in, f.v, f.c);
  }
  if (Builtin m = find_object_method(name)) return m(f.in, f.v, f.c);
  return f.unknown();
}

Value bool_filter(FilterCall& f) {
  const Value& v = f.v;
  const std::string& name = f.name;
  if (!f.parens) {
    if (name == "bool") return v;
    if (name == "int") return Value::integer(v.b);
    if (name == "float") return Value::floating(v.b);
    if (name == "string") return f.in.make_string(v.b ? "true" : "false");
  }
  return f.unknown();
}

// Jinja2 treats an undefined value as an empty string / empty list here.
Value undefined_filter(FilterCall& f) {
  const std::string& name = f.name;
  if (name == "string" || name == "trim" || name == "upper" || name == "lower" || name == "title" ||
      name == "capitalize" || name == "indent" || name == "join" || name == "replace")
    return empty_string();
  if (name == "length" || name == "count") return Value::integer(0);
  if (name == "list" || name == "items" || name == "sort" || name == "reverse" || name == "unique" ||
      name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject" || name == "map")
    return f.in.make_array({});
  if (name == "first" || name == "last") return Value::undefined();
  return f.unknown();
}

}  // namespace

Value Interpreter::apply_filter(const Value& v, const std::string& name, bool parens, CallArgs& c, const EnvPtr& env) {
  FilterCall f{*this, v, name, parens, c, env};
  for (const AnyValueFilter& a : kAnyValueFilters)
    if (name == a.name && (parens || !a.needs_parens)) return a.fn(f);

  // Arguments given to a filter that takes none: allowed when empty, e.g. |length().
  if (parens && c.args.empty() && c.kwargs.empty() &&
      (name != "sort" && name != "map" && name != "indent" && name != "replace" && name != "selectattr" &&
       name != "rejectattr" && name != "select" && name != "reject" && name != "dictsort")) {
    f.parens = false;
  }

  switch (v.kind) {
    case Kind::Array: return array_filter(f);
    case Kind::String: return string_filter(f);
    case Kind::Int:
    case Kind::Float: return number_filter(f);
    case Kind::Object: return object_filter(f);
    case Kind::Bool: return bool_filter(f);
    case Kind::Undefined: return undefined_filter(f);
    default: return f.unknown();
  }
}

}  // namespace th::jinja
