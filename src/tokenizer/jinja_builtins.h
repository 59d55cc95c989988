// The parts of the chat-template language that are not syntax: the global
// functions (range, namespace, dict, strftime_now, raise_exception), the
// methods of strings and dicts, the tests ('x is defined': Interpreter::run_test,
// defined in jinja_builtins.cpp) and the helpers the evaluator
// (jinja_interpreter.cpp) and the filters (jinja_filters.cpp) share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/jinja_interpreter.h"
#include "tokenizer/jinja_value.h"

namespace th::jinja {

/// @brief An index into a sequence of `len` items, Python-style (negative
/// from the end); -1 when out of range.
int64_t resolve_index(double idx, size_t len);

/// @brief Python's list slicing as @huggingface/jinja does it: the indices of
/// [start:stop:step] over `len` items.
std::vector<size_t> slice_indices(size_t len, const Value& start, const Value& stop, const Value& step);

/// @brief `item.a.b.0`: dict keys and list indices along a dotted path;
/// undefined where the path leads nowhere.
Value attribute_path(const Value& item, std::string_view path);

/// @brief Objects and namespaces: what has attributes by name.
bool is_mapping(const Value& v);

/// @brief Argument `i` if given by position, else keyword `name`, else `dflt`.
const Value& arg_or(const CallArgs& c, size_t i, const char* name, const Value& dflt);

/// @brief A builtin function value named `name`; `self` is the value a method is bound to.
std::shared_ptr<const FunctionData> builtin(std::string name, Builtin fn, Value self = {});

/// @brief Sets the global functions (range, namespace, dict, strftime_now, raise_exception).
void add_global_functions(Env& globals);

/// @brief The string / dict method called `name` ("upper", "items", ...), or null.
Builtin find_string_method(std::string_view name);
Builtin find_object_method(std::string_view name);

/// @brief JavaScript's /\b\w/g -> upper case: each word's first character upper-cased.
std::string title_case(const std::string& s);
/// @brief The first character upper-cased.
std::string capitalize(const std::string& s);

/// @brief A stable merge sort whose comparator may throw: std::sort with an
/// inconsistent comparator (NaN, mixed types) is undefined behaviour.
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

}  // namespace th::jinja
