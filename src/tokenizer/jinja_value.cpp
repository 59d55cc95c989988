#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tokenizer/unicode.h"

namespace th::jinja {

void fail(std::string message, uint32_t pos) { throw JinjaError{std::move(message), pos}; }

Value Value::null() {
  Value v;
  v.kind = Kind::Null;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::Bool;
  v.b = x;
  return v;
}
Value Value::integer(double x) {
  Value v;
  v.kind = Kind::Int;
  v.num = x;
  return v;
}
Value Value::floating(double x) {
  Value v;
  v.kind = Kind::Float;
  v.num = x;
  return v;
}
Value Value::string(std::string s) { return string(std::make_shared<const std::string>(std::move(s))); }
Value Value::string(std::shared_ptr<const std::string> s) {
  Value v;
  v.kind = Kind::String;
  v.str = std::move(s);
  return v;
}
Value Value::array(std::vector<Value> items, bool tuple) {
  auto a = std::make_shared<ArrayData>();
  uint32_t d = 0;
  for (const Value& x : items) d = std::max(d, x.depth());
  if (d + 1 > kMaxValueDepth) fail("a list is nested too deeply");
  a->depth = d + 1;
  a->items = std::move(items);
  Value v;
  v.kind = Kind::Array;
  v.is_tuple = tuple;
  v.arr = std::move(a);
  return v;
}
Value Value::object(std::shared_ptr<ObjectData> o) {
  Value v;
  v.kind = Kind::Object;
  v.obj = std::move(o);
  return v;
}
Value Value::namespace_(std::shared_ptr<ObjectData> o) {
  Value v;
  v.kind = Kind::Namespace;
  v.obj = std::move(o);
  return v;
}
Value Value::function(std::shared_ptr<const FunctionData> f) {
  Value v;
  v.kind = Kind::Function;
  v.fn = std::move(f);
  return v;
}

const std::vector<Value>& Value::items() const { return arr->items; }

bool Value::truthy() const {
  switch (kind) {
    case Kind::Undefined:
    case Kind::Null:
      return false;
    case Kind::Bool:
      return b;
    case Kind::Int:
    case Kind::Float:
      return num != 0 && !std::isnan(num);
    case Kind::String:
      return !str->empty();
    case Kind::Array:
      return !arr->items.empty();
    case Kind::Object:
      return !obj->entries.empty();
    case Kind::Namespace:
    case Kind::Function:
      return true;
  }
  return false;
}

uint32_t Value::depth() const {
  if (kind == Kind::Array) return arr->depth;
  if (kind == Kind::Object || kind == Kind::Namespace) return obj->depth;
  return 0;
}

const Value* ObjectData::find(std::string_view key) const {
  if (index.empty()) {
    for (const auto& e : entries)
      if (e.first == key) return &e.second;
    return nullptr;
  }
  auto it = index.find(key);
  return it == index.end() ? nullptr : &entries[it->second].second;
}

void ObjectData::set(std::string key, Value v) {
  depth = std::max(depth, v.depth() + 1);
  if (Value* existing = const_cast<Value*>(find(key))) {
    *existing = std::move(v);
    return;
  }
  add_new(std::move(key), std::move(v));
}

void ObjectData::add_new(std::string key, Value v) {
  depth = std::max(depth, v.depth() + 1);
  if (!index.empty()) {
    index.emplace(key, entries.size());
  } else if (entries.size() + 1 > kLinearEntries) {
    for (size_t i = 0; i < entries.size(); ++i) index.emplace(entries[i].first, i);
    index.emplace(key, entries.size());
  }
  entries.emplace_back(std::move(key), std::move(v));
}

const Value* CallArgs::kwarg(std::string_view name) const {
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

// --- Text helpers ----------------------------------------------------------

namespace {

// Decodes the code point at s[i]; returns its byte length (1 for a malformed
// byte, which then stands for itself as cp = 0xFFFFFFFF).
size_t decode_at(std::string_view s, size_t i, uint32_t* cp) {
  const auto c = static_cast<uint8_t>(s[i]);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t len = c >= 0xF0 && c < 0xF8 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
  if (len == 0 || i + len > s.size()) {
    *cp = UINT32_MAX;
    return 1;
  }
  uint32_t v = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
  for (size_t k = 1; k < len; ++k) {
    const auto cc = static_cast<uint8_t>(s[i + k]);
    if ((cc & 0xC0) != 0x80) {
      *cp = UINT32_MAX;
      return 1;
    }
    v = (v << 6) | (cc & 0x3F);
  }
  *cp = v;
  return len;
}

bool is_js_space_cp(uint32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20:
    case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F:
    case 0x205F: case 0x3000: case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

uint32_t upper_cp(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x131) return 'I';
    const bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (c == 0x138 || c == 0x149 || c == 0x17F) return c == 0x17F ? 'S' : c;
    return odd_upper ? ((c & 1) == 0 ? c - 1 : c) : ((c & 1) == 1 ? c - 1 : c);
  }
  if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 32;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

uint32_t lower_cp(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x130) return 'i';
    const bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (c == 0x138 || c == 0x149 || c == 0x17F) return c;
    return odd_upper ? ((c & 1) == 1 ? c + 1 : c) : ((c & 1) == 0 ? c + 1 : c);
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

std::string map_case(std::string_view s, bool upper) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    const size_t n = decode_at(s, i, &cp);
    if (cp == UINT32_MAX) {
      out += s[i];
    } else if (upper && cp == 0xDF) {
      out += "SS";  // as JavaScript's toUpperCase
    } else {
      unicode::append_utf8(out, upper ? upper_cp(cp) : lower_cp(cp));
    }
    i += n;
  }
  return out;
}

}  // namespace

size_t js_space_len(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  uint32_t cp;
  const size_t n = decode_at(s, i, &cp);
  return cp != UINT32_MAX && is_js_space_cp(cp) ? n : 0;
}

size_t js_space_len_before(std::string_view s, size_t end) {
  for (size_t n = 1; n <= 3 && n <= end; ++n)
    if (js_space_len(s, end - n) == n) return n;
  return 0;
}

std::string_view js_trim_start(std::string_view s) {
  size_t i = 0;
  while (size_t n = js_space_len(s, i)) i += n;
  return s.substr(i);
}

std::string_view js_trim_end(std::string_view s) {
  size_t end = s.size();
  while (size_t n = js_space_len_before(s, end)) end -= n;
  return s.substr(0, end);
}

size_t cp_count(std::string_view s) {
  size_t count = 0;
  for (size_t i = 0; i < s.size(); ++count) {
    uint32_t cp;
    i += decode_at(s, i, &cp);
  }
  return count;
}

std::vector<std::string_view> cp_split(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    const size_t n = decode_at(s, i, &cp);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string to_upper(std::string_view s) { return map_case(s, true); }
std::string to_lower(std::string_view s) { return map_case(s, false); }

// --- Numbers ---------------------------------------------------------------

std::string js_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (v == 0) return "0";
  if (std::isinf(v)) return v < 0 ? "-Infinity" : "Infinity";
  std::string sign = v < 0 ? "-" : "";
  v = std::fabs(v);
  // Shortest round-trip digits, as d.ddde[+-]x.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  const int exp10 = std::atoi(sci.c_str() + e + 1);
  const int k = static_cast<int>(digits.size());
  const int n = exp10 + 1;  // value = 0.digits * 10^n
  if (k <= n && n <= 21) return sign + digits + std::string(n - k, '0');
  if (0 < n && n <= 21) return sign + digits.substr(0, n) + "." + digits.substr(n);
  if (-6 < n && n <= 0) return sign + "0." + std::string(-n, '0') + digits;
  std::string mant = digits.substr(0, 1);
  if (k > 1) mant += "." + digits.substr(1);
  return sign + mant + "e" + (n - 1 >= 0 ? "+" : "-") + std::to_string(std::abs(n - 1));
}

namespace {

std::string float_string(double v) {
  if (v == 0 && std::signbit(v)) return "-0.0";
  if (std::isfinite(v) && std::fmod(v, 1.0) == 0) {
    if (std::fabs(v) >= 1e21) return js_number(v);  // toFixed gives up there too
    char buf[400];
    std::snprintf(buf, sizeof(buf), "%.1f", v);
    return buf;
  }
  return js_number(v);
}

void json_escape(std::string& out, std::string_view s, bool ensure_ascii) {
  static const char* kHex = "0123456789abcdef";
  auto u_escape = [&](uint32_t unit) {
    out += "\\u";
    for (int sh = 12; sh >= 0; sh -= 4) out += kHex[(unit >> sh) & 0xF];
  };
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          if (c < 0x20 || (ensure_ascii && c == 0x7F)) {
            u_escape(c);
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    uint32_t cp;
    const size_t n = decode_at(s, i, &cp);
    if (!ensure_ascii) {
      out.append(s.substr(i, n));
    } else if (cp == UINT32_MAX) {
      u_escape(0xFFFD);
    } else if (cp >= 0x10000) {
      u_escape(0xD800 + ((cp - 0x10000) >> 10));
      u_escape(0xDC00 + ((cp - 0x10000) & 0x3FF));
    } else {
      u_escape(cp);
    }
    i += n;
  }
  out += '"';
}

// An approximation of String.prototype.localeCompare (ICU root collation) for
// sort_keys: punctuation before digits before letters, letters case-blind
// first, lower case before upper case on ties.
int locale_compare(std::string_view a, std::string_view b) {
  auto cls = [](unsigned char c) { return std::isdigit(c) ? 1 : std::isalpha(c) ? 2 : c >= 0x80 ? 3 : 0; };
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const auto ca = static_cast<unsigned char>(a[i]), cb = static_cast<unsigned char>(b[i]);
    if (cls(ca) != cls(cb)) return cls(ca) < cls(cb) ? -1 : 1;
    const int la = std::tolower(ca), lb = std::tolower(cb);
    if (la != lb) return la < lb ? -1 : 1;
  }
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return std::islower(static_cast<unsigned char>(a[i])) ? -1 : 1;
  return 0;
}

void to_json_rec(std::string& out, const Value& v, const JsonOptions& opt, int depth) {
  if (depth > static_cast<int>(kMaxValueDepth) + 1) fail("tojson: value nested too deeply (or it contains itself)");
  switch (v.kind) {
    case Kind::Null: out += "null"; return;
    case Kind::Undefined: out += opt.undefined_as_null ? "null" : "undefined"; return;
    case Kind::Bool: out += v.b ? "true" : "false"; return;
    case Kind::Int:
    case Kind::Float: out += std::isfinite(v.num) ? js_number(v.num) : "null"; return;
    case Kind::String: json_escape(out, v.s(), opt.ensure_ascii); return;
    case Kind::Function: fail("tojson: cannot convert a function to JSON");
    default: break;
  }
  const std::string item_sep = opt.has_separators ? opt.item_sep : opt.indent ? "," : ", ";
  const std::string key_sep = opt.has_separators ? opt.key_sep : ": ";
  const std::string indent_unit(static_cast<size_t>(opt.indent), ' ');
  std::string base_pad, child_pad;
  if (opt.indent) {
    base_pad = "\n";
    for (int i = 0; i < depth; ++i) base_pad += indent_unit;
    child_pad = base_pad + indent_unit;
  }
  if (v.kind == Kind::Array) {
    const auto& items = v.items();
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_sep;
      if (opt.indent) out += child_pad;
      to_json_rec(out, items[i], opt, depth + 1);
    }
    if (opt.indent && !items.empty()) out += base_pad;
    out += ']';
    return;
  }
  std::vector<const std::pair<std::string, Value>*> entries;
  for (const auto& e : v.obj->entries) entries.push_back(&e);
  if (opt.sort_keys)
    std::stable_sort(entries.begin(), entries.end(),
                     [](auto* x, auto* y) { return locale_compare(x->first, y->first) < 0; });
  out += '{';
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i) out += item_sep;
    if (opt.indent) out += child_pad;
    json_escape(out, entries[i]->first, opt.ensure_ascii);
    out += key_sep;
    to_json_rec(out, entries[i]->second, opt, depth + 1);
  }
  if (opt.indent && !entries.empty()) out += base_pad;
  out += '}';
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& opt) {
  std::string out;
  to_json_rec(out, v, opt, 0);
  return out;
}

std::string output_string(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "undefined";
    case Kind::Null: return "null";
    case Kind::Bool: return v.b ? "true" : "false";
    case Kind::Int: return js_number(v.num);
    case Kind::Float: return float_string(v.num);
    case Kind::String: return v.s();
    case Kind::Function: return "[function " + v.fn->name + "]";
    default: {
      JsonOptions opt;
      opt.undefined_as_null = false;
      return to_json(v, opt);
    }
  }
}

std::string js_string(const Value& v) {
  switch (v.kind) {
    case Kind::Int:
    case Kind::Float: return js_number(v.num);
    case Kind::Array: {
      std::string out;
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i) out += ',';
        out += output_string(v.items()[i]);
      }
      return out;
    }
    case Kind::Object:
    case Kind::Namespace: return "[object Map]";
    default: return output_string(v);
  }
}

const char* kind_name(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "undefined";
    case Kind::Null: return "none";
    case Kind::Bool: return "boolean";
    case Kind::Int: return "integer";
    case Kind::Float: return "float";
    case Kind::String: return "string";
    case Kind::Array: return v.is_tuple ? "tuple" : "list";
    case Kind::Object: return "dict";
    case Kind::Namespace: return "namespace";
    case Kind::Function: return "function";
  }
  return "?";
}

std::string a_kind(const Value& v) {
  if (v.is_null()) return "none";
  if (v.is_undefined()) return "an undefined value";
  const char* k = kind_name(v);
  return std::string(std::strchr("aeiou", k[0]) ? "an " : "a ") + k;
}

// --- Equality and order ----------------------------------------------------

namespace {

// JavaScript's ToNumber for strings: surrounding whitespace ignored, "" is 0,
// decimal (with exponent), 0x/0o/0b integers, Infinity; anything else NaN.
double js_string_to_number(std::string_view s) {
  s = js_trim(s);
  if (s.empty()) return 0;
  auto all = [&](size_t from, auto pred) {
    if (from >= s.size()) return false;
    for (size_t i = from; i < s.size(); ++i)
      if (!pred(static_cast<unsigned char>(s[i]))) return false;
    return true;
  };
  if (s.size() > 2 && s[0] == '0' && (s[1] | 0x20) != 0 && std::strchr("xob", s[1] | 0x20)) {
    const int base = (s[1] | 0x20) == 'x' ? 16 : (s[1] | 0x20) == 'o' ? 8 : 2;
    const bool ok = all(2, [&](unsigned char c) {
      const int d = std::isdigit(c) ? c - '0' : std::isalpha(c) ? (c | 0x20) - 'a' + 10 : 99;
      return d < base;
    });
    if (!ok) return NAN;
    double v = 0;
    for (size_t i = 2; i < s.size(); ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      v = v * base + (std::isdigit(c) ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
  }
  size_t i = 0;
  bool neg = false;
  if (s[i] == '+' || s[i] == '-') neg = s[i++] == '-';
  if (s.substr(i) == "Infinity") return neg ? -INFINITY : INFINITY;
  size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++frac_digits;
  }
  if (int_digits + frac_digits == 0) return NAN;
  if (i < s.size() && (s[i] | 0x20) == 'e') {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++exp_digits;
    if (exp_digits == 0) return NAN;
  }
  if (i != s.size()) return NAN;
  return std::strtod(std::string(s).c_str(), nullptr);
}

bool is_reference(const Value& v) {
  return v.kind == Kind::Array || v.kind == Kind::Object || v.kind == Kind::Namespace || v.kind == Kind::Function;
}

const void* identity(const Value& v) {
  if (v.kind == Kind::Array) return v.arr.get();
  if (v.kind == Kind::Function) return v.fn.get();
  return v.obj.get();
}

}  // namespace

bool loose_equals(const Value& a, const Value& b) {
  const bool a_nil = a.is_null() || a.is_undefined(), b_nil = b.is_null() || b.is_undefined();
  if (a_nil || b_nil) return a_nil && b_nil;
  if (is_reference(a) && is_reference(b)) return identity(a) == identity(b);
  if (is_reference(a)) return loose_equals(Value::string(js_string(a)), b);
  if (is_reference(b)) return loose_equals(a, Value::string(js_string(b)));
  if (a.kind == Kind::Bool) return loose_equals(Value::integer(a.b ? 1 : 0), b);
  if (b.kind == Kind::Bool) return loose_equals(a, Value::integer(b.b ? 1 : 0));
  if (a.is_string() && b.is_string()) return a.s() == b.s();
  const double x = a.is_string() ? js_string_to_number(a.s()) : a.num;
  const double y = b.is_string() ? js_string_to_number(b.s()) : b.num;
  return x == y;
}

bool strict_equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.num == b.num;
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined:
    case Kind::Null: return true;
    case Kind::Bool: return a.b == b.b;
    case Kind::String: return a.s() == b.s();
    default: return identity(a) == identity(b);
  }
}

int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_null() && b.is_null()) return 0;
  if (a.is_undefined() && b.is_undefined()) return 0;
  if (a.is_null() || b.is_null() || a.is_undefined() || b.is_undefined())
    fail(std::string("cannot compare ") + kind_name(a) + " with " + kind_name(b));
  auto numeric = [](const Value& v) { return v.is_number() || v.kind == Kind::Bool; };
  if (numeric(a) && numeric(b)) {
    const double x = a.kind == Kind::Bool ? a.b : a.num, y = b.kind == Kind::Bool ? b.b : b.num;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    if (case_sensitive) return a.s() < b.s() ? -1 : a.s() > b.s() ? 1 : 0;
    const std::string x = to_lower(a.s()), y = to_lower(b.s());
    return x < y ? -1 : x > y ? 1 : 0;
  }
  fail(std::string("cannot compare ") + kind_name(a) + " with " + kind_name(b));
}

}  // namespace th::jinja
