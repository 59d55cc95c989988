// Token text -> id, looked up by string_view so the tokenizers' inner loops
// never build a std::string to ask.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace th {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

class TokenIndex {
 public:
  /// @brief Adds `text` for `id`; false when the text is already there.
  bool insert(std::string text, int32_t id) { return map_.emplace(std::move(text), id).second; }
  /// @brief The id of `text`, or -1.
  int32_t find(std::string_view text) const {
    auto it = map_.find(text);
    return it == map_.end() ? -1 : it->second;
  }
  void reserve(size_t n) { map_.reserve(n); }

 private:
  StringMap<int32_t> map_;
};

}  // namespace th
