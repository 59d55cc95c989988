// Runs a grammar over a byte stream, as llama.cpp's llama_grammar does: the
// state is the set of parse stacks still alive (each a path of rule positions,
// its top an element that matches one byte), advanced byte by byte. Stacks are
// linked nodes in an arena, so advancing shares every stack's lower part
// instead of copying it; allowed_tokens() walks the token trie depth first,
// pushing nodes as it goes down and dropping them as it comes back up.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_trie.h"

namespace th::grammar {

class Matcher {
 public:
  /// @brief Stacks alive at once, at most: a grammar ambiguous enough to exceed it (far
  /// beyond JSON's 1 or 2) stops matching rather than growing without bound.
  static constexpr size_t kMaxStacks = 256;

  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  /// @brief Advances over `bytes`; false when the grammar refuses them, and then the
  /// state is as before the call.
  bool accept(std::string_view bytes);
  /// @brief The bytes so far are a whole sentence of the grammar (it may also go on).
  bool complete() const;
  /// @brief Some byte may still come.
  bool can_continue() const;
  /// @brief Sets bit t (word t / 64) of `allowed`, which has trie.n_vocab() bits and is
  /// cleared first, for every token t whose bytes the grammar accepts next.
  void allowed_tokens(const TokenTrie& trie, std::vector<uint64_t>& allowed);

 private:
  struct Node {
    uint32_t pos;     // an element of the grammar: the top's matches a byte
    uint32_t parent;  // the rest of the stack (kNone: nothing below)
  };
  using Stacks = std::vector<uint32_t>;  // tops; kNone is the empty stack: complete

  void expand(uint32_t pos, uint32_t parent, Stacks& out);
  void add_top(uint32_t pos, uint32_t parent, Stacks& out);
  bool same(uint32_t a, uint32_t b) const;
  void advance(const Stacks& from, uint8_t byte, Stacks& to);
  ByteSet next_bytes(const Stacks& s) const;
  void walk(const TokenTrie& trie, const TokenTrie::Node& node, size_t depth, std::vector<uint64_t>& allowed);
  void compact();

  std::shared_ptr<const Grammar> g_;
  std::vector<Node> nodes_;
  Stacks stacks_;
  bool overflow_ = false;
  std::vector<Node> work_;     // expand()'s to-do list
  std::vector<Stacks> level_;  // walk()'s stack sets, one per trie depth
};

}  // namespace th::grammar
