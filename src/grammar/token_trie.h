// The vocabulary as a trie over the tokens' bytes, built once per vocabulary:
// computing which tokens may come next walks it with the matcher, so a prefix
// shared by many tokens (" the", "{\"") is matched once, and a byte the
// grammar refuses prunes every token below it at once.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace th::grammar {

class TokenTrie {
 public:
  /// @brief Children of a node are contiguous in nodes(), in increasing byte order; a
  /// node's tokens are those whose bytes end there (several tokens may share bytes).
  struct Node {
    uint32_t first_child = 0, n_children = 0;
    uint32_t first_token = 0, n_tokens = 0;
    uint8_t byte = 0;
  };

  /// @brief pieces[id]: the bytes token id stands for. Empty pieces (control tokens) are
  /// left out: no grammar ever allows them.
  explicit TokenTrie(const std::vector<std::string>& pieces);

  int32_t n_vocab() const { return n_vocab_; }
  const Node& root() const { return nodes_[0]; }
  std::span<const Node> children(const Node& n) const { return {nodes_.data() + n.first_child, n.n_children}; }
  std::span<const int32_t> tokens(const Node& n) const { return {ids_.data() + n.first_token, n.n_tokens}; }
  size_t n_nodes() const { return nodes_.size(); }

 private:
  int32_t n_vocab_;
  std::vector<Node> nodes_;
  std::vector<int32_t> ids_;  // token ids sorted by their bytes
};

}  // namespace th::grammar
