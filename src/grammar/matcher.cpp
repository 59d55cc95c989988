#include "grammar/matcher.h"

#include <algorithm>
#include <limits>

namespace th::grammar {

namespace {
constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : g_(std::move(grammar)) {
  for (uint32_t a : g_->alternatives[g_->root]) expand(a, kNone, stacks_);
}

bool Matcher::same(uint32_t a, uint32_t b) const {
  while (a != b) {
    if (a == kNone || b == kNone || nodes_[a].pos != nodes_[b].pos) return false;
    a = nodes_[a].parent;
    b = nodes_[b].parent;
  }
  return true;
}

void Matcher::add_top(uint32_t pos, uint32_t parent, Stacks& out) {
  for (uint32_t t : out)
    if (t != kNone && nodes_[t].pos == pos && same(nodes_[t].parent, parent)) return;
  if (out.size() >= kMaxStacks) {
    overflow_ = true;
    return;
  }
  nodes_.push_back({pos, parent});
  out.push_back(static_cast<uint32_t>(nodes_.size() - 1));
}

// Every stack that "about to match element `pos`, then `parent`" can become with no byte
// read: rule references expand into their alternatives, finished alternatives return to
// their parent, until each stack's top matches a byte (or the stack is empty).
void Matcher::expand(uint32_t pos, uint32_t parent, Stacks& out) {
  work_.clear();
  work_.push_back({pos, parent});
  while (!work_.empty()) {
    const Node w = work_.back();
    work_.pop_back();
    const Element& e = g_->elements[w.pos];
    if (e.kind == Element::Kind::Bytes) {
      add_top(w.pos, w.parent, out);
    } else if (e.kind == Element::Kind::End) {
      if (w.parent != kNone) work_.push_back(nodes_[w.parent]);
      else if (std::find(out.begin(), out.end(), kNone) == out.end()) out.push_back(kNone);
    } else {
      // A reference last in its alternative returns straight to the parent (a tail
      // call), so right recursion such as `x*` keeps the stack's depth constant.
      uint32_t cont = w.parent;
      if (g_->elements[w.pos + 1].kind != Element::Kind::End) {
        nodes_.push_back({w.pos + 1, w.parent});
        cont = static_cast<uint32_t>(nodes_.size() - 1);
      }
      const std::vector<uint32_t>& alts = g_->alternatives[e.value];
      for (auto a = alts.rbegin(); a != alts.rend(); ++a) work_.push_back({*a, cont});
    }
  }
}

void Matcher::advance(const Stacks& from, uint8_t byte, Stacks& to) {
  for (uint32_t t : from) {
    if (t == kNone) continue;
    const Node n = nodes_[t];
    if (g_->sets[g_->elements[n.pos].value].has(byte)) expand(n.pos + 1, n.parent, to);
  }
}

ByteSet Matcher::next_bytes(const Stacks& s) const {
  ByteSet u;
  for (uint32_t t : s)
    if (t != kNone) u |= g_->sets[g_->elements[nodes_[t].pos].value];
  return u;
}

bool Matcher::complete() const { return std::find(stacks_.begin(), stacks_.end(), kNone) != stacks_.end(); }

bool Matcher::can_continue() const {
  return std::any_of(stacks_.begin(), stacks_.end(), [](uint32_t t) { return t != kNone; });
}

bool Matcher::accept(std::string_view bytes) {
  const size_t mark = nodes_.size();
  Stacks cur = stacks_, next;
  overflow_ = false;
  for (char c : bytes) {
    next.clear();
    advance(cur, static_cast<uint8_t>(c), next);
    if (next.empty() || overflow_) {
      nodes_.resize(mark);
      return false;
    }
    std::swap(cur, next);
  }
  stacks_ = std::move(cur);
  compact();
  return true;
}

// Copies the nodes the live stacks reach into a fresh arena (shared lower parts stay
// shared), so the arena holds what is alive, not every stack ever built.
void Matcher::compact() {
  std::vector<uint32_t> moved(nodes_.size(), kNone);
  std::vector<Node> fresh;
  std::vector<uint32_t> chain;
  for (uint32_t& top : stacks_) {
    chain.clear();
    for (uint32_t t = top; t != kNone && moved[t] == kNone; t = nodes_[t].parent) chain.push_back(t);
    for (auto c = chain.rbegin(); c != chain.rend(); ++c) {
      const uint32_t p = nodes_[*c].parent;
      fresh.push_back({nodes_[*c].pos, p == kNone ? kNone : moved[p]});
      moved[*c] = static_cast<uint32_t>(fresh.size() - 1);
    }
    if (top != kNone) top = moved[top];
  }
  nodes_ = std::move(fresh);
}

void Matcher::allowed_tokens(const TokenTrie& trie, std::vector<uint64_t>& allowed) {
  allowed.assign((static_cast<size_t>(trie.n_vocab()) + 63) / 64, 0);
  if (level_.empty()) level_.resize(1);
  level_[0] = stacks_;
  overflow_ = false;
  walk(trie, trie.root(), 0, allowed);
}

void Matcher::walk(const TokenTrie& trie, const TokenTrie::Node& node, size_t depth, std::vector<uint64_t>& allowed) {
  if (level_.size() < depth + 2) level_.resize(depth + 2);
  const ByteSet next = next_bytes(level_[depth]);
  for (const TokenTrie::Node& child : trie.children(node)) {
    if (!next.has(child.byte)) continue;
    const size_t mark = nodes_.size();
    Stacks& to = level_[depth + 1];
    to.clear();
    overflow_ = false;
    advance(level_[depth], child.byte, to);
    if (!to.empty() && !overflow_) {
      for (int32_t id : trie.tokens(child)) allowed[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
      if (child.n_children > 0) walk(trie, child, depth + 1, allowed);
    }
    nodes_.resize(mark);
  }
}

}  // namespace th::grammar
