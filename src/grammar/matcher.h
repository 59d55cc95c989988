// Runs a grammar over a byte stream, as llama.cpp's llama_grammar does: the
// state is the set of parse stacks still alive (each a path of rule positions,
// its top an element that matches one byte), advanced byte by byte. Stacks are
// linked nodes, hash-consed (one node per (position, rest of the stack)), so a
// set of stacks is a sorted list of node ids with an id of its own, and a step
// (set, byte) -> set is computed once and then looked up: inside a JSON string
// the same set comes back after nearly every byte, so walking the token trie
// there costs a lookup per trie node.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_trie.h"

namespace th::grammar {

class Matcher {
 public:
  /// @brief Stacks alive at once, at most: a grammar ambiguous enough to exceed it (far
  /// beyond JSON's 1 or 2) stops matching rather than growing without bound.
  static constexpr size_t kMaxStacks = 256;
  /// @brief Nodes kept for the step cache; past this, the cache starts over from the
  /// current state (and a single trie walk that gets there allows no more tokens).
  static constexpr size_t kMaxNodes = size_t{1} << 20;
  static constexpr size_t kMaxSets = size_t{1} << 12;  // their step tables: 1 KiB each, 4 MiB a sequence at most
  /// @brief A mask whose trie walk visited at least kMemoVisits nodes is kept for its set
  /// (inside a JSON string the walk visits nearly the whole trie, 1-5 ms, and the same set
  /// comes back token after token), up to kMaxMaskBytes of masks a sequence.
  static constexpr size_t kMemoVisits = 4096;
  static constexpr size_t kMaxMaskBytes = size_t{2} << 20;

  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  /// @brief Advances over `bytes`; false when the grammar refuses them, and then the
  /// state is as before the call.
  bool accept(std::string_view bytes);
  /// @brief Whether accept(bytes) would succeed; the state stays as it is.
  bool accepts(std::string_view bytes);
  /// @brief The bytes so far are a whole sentence of the grammar (it may also go on).
  bool complete() const;
  /// @brief Some byte may still come.
  bool can_continue() const;
  /// @brief Sets bit t (word t / 64) of `allowed`, which has trie.n_vocab() bits and is
  /// cleared first, for every token t whose bytes the grammar accepts next. A matcher is
  /// meant for one trie: its kept masks are dropped when another comes.
  void allowed_tokens(const TokenTrie& trie, std::vector<uint64_t>& allowed);
  /// @brief Masks kept for sets met again (see kMemoVisits).
  size_t kept_masks() const { return masks_.size(); }

 private:
  struct Node {
    uint32_t pos;     // an element of the grammar: the top's matches a byte
    uint32_t parent;  // the rest of the stack (kNone: nothing below)
  };
  using Stacks = std::vector<uint32_t>;  // tops, sorted; kNone is the empty stack: complete

  uint32_t node(uint32_t pos, uint32_t parent);
  void expand(uint32_t pos, uint32_t parent, Stacks& out);
  void add_top(uint32_t pos, uint32_t parent, Stacks& out);
  uint32_t intern(Stacks s);
  uint32_t step(uint32_t set, uint8_t byte);
  void walk(const TokenTrie& trie, const TokenTrie::Node& node, uint32_t set, std::vector<uint64_t>& allowed);
  void start_over();
  void forget_masks(const TokenTrie* trie);  // no kept mask; the next ones are for `trie`

  std::shared_ptr<const Grammar> g_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;  // (pos, parent) -> node
  std::vector<Stacks> sets_;                         // every set of stacks met
  std::vector<ByteSet> set_bytes_;                   // the bytes each set can take next
  std::map<Stacks, uint32_t> set_ids_;
  std::vector<uint32_t> steps_;  // [set * 256 + byte] -> set, kDead, or not computed yet
  uint32_t state_ = 0;                               // the current set
  std::unordered_map<uint32_t, std::vector<uint64_t>> masks_;  // set -> its allowed tokens
  const TokenTrie* mask_trie_ = nullptr;                       // the trie masks_ are for
  size_t mask_bytes_ = 0;
  size_t visits_ = 0;                                          // trie nodes the last walk visited
  bool overflow_ = false;
  std::vector<Node> work_;  // expand()'s to-do list
};

}  // namespace th::grammar
