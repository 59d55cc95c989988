// String -> int32 tables for the tokenizers' inner loops: token text -> id,
// merge -> rank, word -> cached ids. Open addressing over one flat slot
// array, keys in one buffer, looked up by string_view without allocating:
// these look-ups are most of the encoding time.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace th {

class StringTable {
 public:
  void reserve(size_t n) {
    if (n * 2 > slots_.size()) rehash(n * 2);
    offsets_.reserve(n + 1);
    values_.reserve(n);
  }

  /// @brief Adds `key` -> `value`; false (and no change) when `key` is already there.
  bool insert(std::string_view key, int32_t value) {
    if ((values_.size() + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 16 : slots_.size() * 2);
    const uint64_t h = hash(key);
    size_t i = h & mask_;
    for (; slots_[i].entry != 0; i = (i + 1) & mask_)
      if (slots_[i].tag == tag(h) && this->key(slots_[i].entry - 1) == key) return false;
    slots_[i] = {tag(h), static_cast<uint32_t>(values_.size() + 1)};
    chars_.append(key);
    offsets_.push_back(static_cast<uint32_t>(chars_.size()));
    values_.push_back(value);
    return true;
  }

  /// @brief The value of `key`, or -1.
  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash(key);
    for (size_t i = h & mask_; slots_[i].entry != 0; i = (i + 1) & mask_)
      if (slots_[i].tag == tag(h) && this->key(slots_[i].entry - 1) == key)
        return values_[slots_[i].entry - 1];
    return -1;
  }

  size_t size() const { return values_.size(); }

 private:
  struct Slot {
    uint32_t tag;
    uint32_t entry;  // index + 1; 0 = empty
  };

  static uint64_t hash(std::string_view s) {
    // Word-at-a-time multiply-xorshift: keys are short (a few bytes).
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xFF51AFD7ED558CCDull);
    const char* p = s.data();
    size_t n = s.size();
    for (; n >= 8; p += 8, n -= 8) {
      uint64_t k;
      std::memcpy(&k, p, 8);
      h = (h ^ k) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    if (n > 0) {
      uint64_t k = 0;
      std::memcpy(&k, p, n);
      h = (h ^ k) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    h *= 0x94D049BB133111EBull;
    return h ^ (h >> 29);
  }
  static uint32_t tag(uint64_t h) { return static_cast<uint32_t>(h >> 32); }

  std::string_view key(size_t e) const {
    const uint32_t begin = e == 0 ? 0 : offsets_[e - 1];
    return std::string_view(chars_).substr(begin, offsets_[e] - begin);
  }

  void rehash(size_t want) {
    size_t n = 16;
    while (n < want) n *= 2;
    slots_.assign(n, Slot{0, 0});
    mask_ = n - 1;
    for (size_t e = 0; e < values_.size(); ++e) {
      const uint64_t h = hash(key(e));
      size_t i = h & mask_;
      while (slots_[i].entry != 0) i = (i + 1) & mask_;
      slots_[i] = {tag(h), static_cast<uint32_t>(e + 1)};
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  std::string chars_;              // all keys, back to back
  std::vector<uint32_t> offsets_;  // end of key e in chars_
  std::vector<int32_t> values_;
};

/// Token text -> id.
class TokenIndex {
 public:
  /// @brief Adds `text` for `id`; false when the text is already there.
  bool insert(std::string_view text, int32_t id) { return table_.insert(text, id); }
  /// @brief The id of `text`, or -1.
  int32_t find(std::string_view text) const { return table_.find(text); }
  void reserve(size_t n) { table_.reserve(n); }

 private:
  StringTable table_;
};

}  // namespace th
