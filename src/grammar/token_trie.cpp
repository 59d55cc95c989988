#include "grammar/token_trie.h"

#include <algorithm>
#include <deque>

namespace th::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& pieces) : n_vocab_(static_cast<int32_t>(pieces.size())) {
  for (size_t id = 0; id < pieces.size(); ++id)
    if (!pieces[id].empty()) ids_.push_back(static_cast<int32_t>(id));
  std::sort(ids_.begin(), ids_.end(), [&](int32_t a, int32_t b) {
    return pieces[static_cast<size_t>(a)] < pieces[static_cast<size_t>(b)] || (pieces[static_cast<size_t>(a)] == pieces[static_cast<size_t>(b)] && a < b);
  });
  // Breadth first: a node's ids are a range of ids_ (sorted, so the ones that end at this
  // depth come first), and its children are allocated together, so they are contiguous.
  struct Todo {
    uint32_t node, lo, hi, depth;
  };
  nodes_.emplace_back();
  std::deque<Todo> todo{{0, 0, static_cast<uint32_t>(ids_.size()), 0}};
  auto piece = [&](uint32_t k) -> const std::string& { return pieces[static_cast<size_t>(ids_[k])]; };
  while (!todo.empty()) {
    const Todo t = todo.front();
    todo.pop_front();
    uint32_t k = t.lo;
    while (k < t.hi && piece(k).size() == t.depth) ++k;
    nodes_[t.node].first_token = t.lo;
    nodes_[t.node].n_tokens = k - t.lo;
    nodes_[t.node].first_child = static_cast<uint32_t>(nodes_.size());
    while (k < t.hi) {
      const auto byte = static_cast<uint8_t>(piece(k)[t.depth]);
      uint32_t end = k;
      while (end < t.hi && static_cast<uint8_t>(piece(end)[t.depth]) == byte) ++end;
      Node child;
      child.byte = byte;
      nodes_.push_back(child);
      todo.push_back({static_cast<uint32_t>(nodes_.size() - 1), k, end, t.depth + 1});
      ++nodes_[t.node].n_children;
      k = end;
    }
  }
}

}  // namespace th::grammar
