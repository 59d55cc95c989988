// A context-free grammar over bytes, the form every constraint compiles to
// (GBNF text, JSON schemas, regexes, choices): rules of alternatives, each a
// sequence of elements that match one byte from a set or expand another rule.
// Characters outside ASCII become their UTF-8 byte sequences here, so the
// matcher and the token trie work on bytes alone and never split a character
// into a state of their own.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"

namespace th::grammar {

/// @brief A set of bytes: bit b of word b / 64.
struct ByteSet {
  std::array<uint64_t, 4> w{};
  bool has(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { w[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  ByteSet& operator|=(const ByteSet& o) {
    for (size_t i = 0; i < 4; ++i) w[i] |= o.w[i];
    return *this;
  }
  bool operator==(const ByteSet&) const = default;
};

struct Element {
  enum class Kind : uint8_t { End, Bytes, Ref };
  Kind kind = Kind::End;
  uint32_t value = 0;  // Bytes: index into Grammar::sets; Ref: the rule
  bool operator==(const Element&) const = default;
};

/// @brief What a grammar may cost, checked while it is built: every grammar comes from a
/// request, and a few bytes of `x{0,1000}{0,1000}` would otherwise expand to millions of rules.
struct GrammarLimits {
  size_t max_text_bytes = 1 << 20;  // GBNF text (a compiled JSON schema included)
  size_t max_rules = 20000;
  size_t max_elements = 500000;
  int max_depth = 64;               // nested groups in GBNF, nested schemas and regex groups
  int max_repeat = 1000;            // m and n of {m,n}
};

/// @brief Rules as flat arrays: each alternative is a run of elements in `elements` ending
/// with an End element; alternatives[r] holds where rule r's alternatives start.
struct Grammar {
  std::vector<Element> elements;
  std::vector<ByteSet> sets;
  std::vector<std::vector<uint32_t>> alternatives;
  std::vector<std::string> names;
  uint32_t root = 0;
};

using Alternative = std::vector<Element>;

/// @brief Builds a Grammar rule by rule, within GrammarLimits; finish() checks that every
/// rule used is defined and that none is left-recursive (the matcher expands rules
/// top-down, so a left-recursive rule would never stop expanding).
class GrammarBuilder {
 public:
  explicit GrammarBuilder(GrammarLimits limits = {}) : limits_(limits) {}
  const GrammarLimits& limits() const { return limits_; }

  /// @brief The id of the rule named `name`, created undefined on first use.
  Result<uint32_t> rule(std::string_view name);
  /// @brief A new generated rule, named `base` plus a number.
  Result<uint32_t> fresh_rule(std::string_view base);
  bool defined(uint32_t rule) const { return defined_[rule]; }
  Status define(uint32_t rule, std::vector<Alternative> alternatives);

  Element bytes(const ByteSet& s);
  static Element ref(uint32_t rule) { return {Element::Kind::Ref, rule}; }
  /// @brief Elements matching one code point in the closed ranges (or, negated, outside
  /// them; surrogates never), appended to `seq`: one byte set for ASCII, a generated rule
  /// over the UTF-8 byte sequences otherwise.
  Status char_class(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated, Alternative& seq);
  /// @brief The UTF-8 bytes of `text`, one element each, appended to `seq`.
  void literal(std::string_view text, Alternative& seq);
  /// @brief `e` repeated min to max times (max < 0: unbounded), appended to `seq`.
  Status repeat(Element e, int min, int max, Alternative& seq);
  /// @brief A rule of `alternatives`, referenced: what a parenthesised group becomes.
  Result<Element> group(std::vector<Alternative> alternatives);

  Result<Grammar> finish(std::string_view root_name);

 private:
  Status count(size_t n_elements);
  Status check_left_recursion(const Grammar& g) const;

  GrammarLimits limits_;
  Grammar g_;
  std::vector<std::vector<Alternative>> rules_;
  std::vector<bool> defined_;
  std::unordered_map<std::string, uint32_t> by_name_;
  size_t n_elements_ = 0;
  uint32_t n_fresh_ = 0;
};

/// @brief An error message fit for one line of JSON: control characters and bytes that are
/// not valid UTF-8 (echoed from a request's grammar or schema) become '?'.
Status printable(const Status& error);

/// @brief The UTF-8 encoding of code point `cp` (<= 0x10FFFF), appended to `out`.
void append_utf8(uint32_t cp, std::string& out);

}  // namespace th::grammar
