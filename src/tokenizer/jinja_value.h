// Values of the chat-template engine (a Jinja2 dialect): what templates
// compute with, and how they print, compare and serialize.
//
// The semantics are those of @huggingface/jinja, the renderer that
// transformers.js and the Hugging Face Hub use and that our tests compare
// against byte for byte: numbers are doubles tagged integer or float (JS
// numbers), `==` is JavaScript's loose equality, booleans print as
// true/false, lists and dicts print as JSON. Where that renderer fails on
// something Python's Jinja2 renders (undefined with `~`, iterating a string),
// we render as Jinja2 does.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace th::jinja {

/// @brief A template error: what went wrong and where (an offset into the
/// preprocessed source, kNoPos when not yet known). Thrown inside the engine
/// so that an error deep in a recursive evaluation unwinds in one step; the
/// public API (chat_template.h) turns it into a Status.
struct JinjaError {
  static constexpr uint32_t kNoPos = UINT32_MAX;
  std::string message;
  uint32_t pos = kNoPos;
};
[[noreturn]] void fail(std::string message, uint32_t pos = JinjaError::kNoPos);

enum class Kind : uint8_t { Undefined, Null, Bool, Int, Float, String, Array, Object, Namespace, Function };

struct Value;
struct ArrayData;
struct ObjectData;
struct FunctionData;

struct Value {
  Kind kind = Kind::Undefined;
  bool is_tuple = false;  // an Array made by a tuple literal: (a, b)
  bool b = false;
  double num = 0;  // Int and Float (Int holds an integral double, as in JS)
  std::shared_ptr<const std::string> str;
  std::shared_ptr<ArrayData> arr;
  std::shared_ptr<ObjectData> obj;  // Object and Namespace
  std::shared_ptr<const FunctionData> fn;

  static Value undefined() { return Value(); }
  static Value null();
  static Value boolean(bool v);
  static Value integer(double v);
  static Value floating(double v);
  static Value string(std::string s);
  static Value string(std::shared_ptr<const std::string> s);
  static Value array(std::vector<Value> items, bool tuple = false);
  static Value object(std::shared_ptr<ObjectData> o);
  static Value namespace_(std::shared_ptr<ObjectData> o);
  static Value function(std::shared_ptr<const FunctionData> f);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_null() const { return kind == Kind::Null; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float; }
  bool is_string() const { return kind == Kind::String; }
  bool is_array() const { return kind == Kind::Array; }
  bool is_object() const { return kind == Kind::Object; }
  const std::string& s() const { return *str; }
  const std::vector<Value>& items() const;
  /// @brief Python/JS truthiness: empty strings, lists and dicts, 0, NaN,
  /// none and undefined are false; namespaces and functions are true.
  bool truthy() const;
  /// @brief Nesting depth (0 for scalars), tracked so that a template cannot
  /// build a structure deep enough to overflow the stack when printed or freed.
  uint32_t depth() const;
};

/// Deepest nesting of lists/dicts a value may have.
inline constexpr uint32_t kMaxValueDepth = 512;

struct ArrayData {
  std::vector<Value> items;
  uint32_t depth = 1;
};

/// @brief A dict (or a namespace's attributes): keys in insertion order, as
/// JavaScript's Map and Python's dict keep them.
struct ObjectData {
  std::vector<std::pair<std::string, Value>> entries;
  // Small dicts (messages, loop) are searched in order; larger ones get an index.
  static constexpr size_t kLinearEntries = 16;
  std::map<std::string, size_t, std::less<>> index;
  uint32_t depth = 1;
  const Value* find(std::string_view key) const;
  /// Replaces the value of an existing key in place, else appends.
  void set(std::string key, Value v);
  /// Appends a key known not to be there yet (no search).
  void add_new(std::string key, Value v);
};

class Interpreter;
struct Node;
struct Env;

/// @brief Arguments of a call: positional, then keyword (in call order).
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  const Value* kwarg(std::string_view name) const;
};

using Builtin = Value (*)(Interpreter& in, const Value& self, CallArgs& call);

/// @brief Something callable: a builtin (with the value it is bound to, for
/// methods such as "abc".upper), a macro, or the `caller` of a call block.
struct FunctionData {
  std::string name;
  Builtin builtin = nullptr;
  Value self;
  const Node* macro = nullptr;           // Macro or CallBlock node
  std::shared_ptr<Env> closure;          // the call block's scope, for `caller`
};

// --- Text helpers ----------------------------------------------------------

/// Byte length of the JavaScript whitespace character (\s) at s[i], 0 if none.
size_t js_space_len(std::string_view s, size_t i);
/// Byte length of the JavaScript whitespace character that ends at s[end-1].
size_t js_space_len_before(std::string_view s, size_t end);
std::string_view js_trim_start(std::string_view s);
std::string_view js_trim_end(std::string_view s);
inline std::string_view js_trim(std::string_view s) { return js_trim_end(js_trim_start(s)); }
/// Number of code points (malformed bytes count one each).
size_t cp_count(std::string_view s);
/// Splits into code points (malformed bytes one each).
std::vector<std::string_view> cp_split(std::string_view s);
/// Upper/lower case of ASCII, Latin-1, Greek and Cyrillic letters; other
/// characters are kept.
std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);

// --- Printing and comparing ------------------------------------------------

/// JavaScript's Number.prototype.toString (shortest round trip).
std::string js_number(double v);
/// How `{{ v }}` prints: floats keep ".0", lists and dicts print as JSON.
std::string output_string(const Value& v);
/// JavaScript's String(v.value): what `~`, `+` with a string and `join` use.
std::string js_string(const Value& v);
/// Human-readable kind name for error messages ("integer"), and with its
/// article ("an integer").
const char* kind_name(const Value& v);
std::string a_kind(const Value& v);

struct JsonOptions {
  int indent = 0;  // 0: one line
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_separators = false;
  std::string item_sep, key_sep;
  bool undefined_as_null = true;  // false: prints `undefined`, as printing a list does
};
std::string to_json(const Value& v, const JsonOptions& opt = {});

/// JavaScript's `a == b` on the underlying values (what `==` does).
bool loose_equals(const Value& a, const Value& b);
/// JavaScript's `a === b` on the underlying values (what `in` on a list uses).
bool strict_equals(const Value& a, const Value& b);
/// Ordering for sort/dictsort: numbers (and booleans) with numbers, strings
/// with strings, none with none; anything else is an error.
int compare_values(const Value& a, const Value& b, bool case_sensitive);

}  // namespace th::jinja
