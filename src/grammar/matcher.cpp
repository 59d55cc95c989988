#include "grammar/matcher.h"

#include <algorithm>
#include <limits>

namespace th::grammar {

namespace {
constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();  // below the bottom of a stack
constexpr uint32_t kDead = std::numeric_limits<uint32_t>::max();  // no stack left: the byte is refused
constexpr uint32_t kUnknown = kDead - 1;                           // a step not computed yet
}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : g_(std::move(grammar)) {
  Stacks s;
  for (uint32_t a : g_->alternatives[g_->root]) expand(a, kNone, s);
  state_ = intern(std::move(s));
}

uint32_t Matcher::node(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  auto [it, inserted] = node_ids_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (inserted) nodes_.push_back({pos, parent});
  return it->second;
}

void Matcher::add_top(uint32_t pos, uint32_t parent, Stacks& out) {
  const uint32_t n = node(pos, parent);  // hash-consed: the same stack is the same id
  if (std::find(out.begin(), out.end(), n) != out.end()) return;
  if (out.size() >= kMaxStacks) {
    overflow_ = true;
    return;
  }
  out.push_back(n);
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
      const uint32_t cont = g_->elements[w.pos + 1].kind == Element::Kind::End ? w.parent : node(w.pos + 1, w.parent);
      const std::vector<uint32_t>& alts = g_->alternatives[e.value];
      for (auto a = alts.rbegin(); a != alts.rend(); ++a) work_.push_back({*a, cont});
    }
  }
}

uint32_t Matcher::intern(Stacks s) {
  std::sort(s.begin(), s.end());
  auto [it, inserted] = set_ids_.try_emplace(s, static_cast<uint32_t>(sets_.size()));
  if (inserted) {
    ByteSet next;
    for (uint32_t t : s)
      if (t != kNone) next |= g_->sets[g_->elements[nodes_[t].pos].value];
    sets_.push_back(std::move(s));
    set_bytes_.push_back(next);
    steps_.resize(steps_.size() + 256, kUnknown);
  }
  return it->second;
}

uint32_t Matcher::step(uint32_t set, uint8_t byte) {
  const size_t key = size_t{set} * 256 + byte;
  if (steps_[key] != kUnknown) return steps_[key];
  if (!set_bytes_[set].has(byte) || nodes_.size() > kMaxNodes || sets_.size() > kMaxSets) return kDead;
  Stacks to;
  overflow_ = false;
  for (size_t k = 0; k < sets_[set].size(); ++k) {  // by index: nodes_ grows below, sets_ does not
    const uint32_t t = sets_[set][k];
    if (t == kNone) continue;
    const Node n = nodes_[t];
    if (g_->sets[g_->elements[n.pos].value].has(byte)) expand(n.pos + 1, n.parent, to);
  }
  const uint32_t result = to.empty() || overflow_ ? kDead : intern(std::move(to));
  steps_[key] = result;
  return result;
}

bool Matcher::complete() const {
  const Stacks& s = sets_[state_];
  return !s.empty() && s.back() == kNone;  // sorted: kNone, the largest id, comes last
}

bool Matcher::can_continue() const {
  const Stacks& s = sets_[state_];
  return !s.empty() && s.front() != kNone;
}

bool Matcher::accepts(std::string_view bytes) {
  uint32_t s = state_;
  for (size_t i = 0; i < bytes.size() && s != kDead; ++i) s = step(s, static_cast<uint8_t>(bytes[i]));
  return s != kDead;
}

bool Matcher::accept(std::string_view bytes) {
  if (nodes_.size() > kMaxNodes || sets_.size() > kMaxSets) start_over();
  uint32_t s = state_;
  for (char c : bytes) {
    s = step(s, static_cast<uint8_t>(c));
    if (s == kDead) return false;
  }
  state_ = s;
  return true;
}

// Drops every cached node, set and step but what the current state needs.
void Matcher::start_over() {
  std::vector<Node> old = std::move(nodes_);
  const Stacks current = sets_[state_];
  nodes_.clear();
  node_ids_.clear();
  sets_.clear();
  set_bytes_.clear();
  set_ids_.clear();
  steps_.clear();
  forget_masks(mask_trie_);  // kept by set id, and the ids start over
  Stacks fresh;
  std::vector<uint32_t> chain;
  for (uint32_t top : current) {
    chain.clear();
    for (uint32_t t = top; t != kNone; t = old[t].parent) chain.push_back(t);
    uint32_t below = kNone;
    for (auto c = chain.rbegin(); c != chain.rend(); ++c) below = node(old[*c].pos, below);
    fresh.push_back(below);
  }
  state_ = intern(std::move(fresh));
}

void Matcher::allowed_tokens(const TokenTrie& trie, std::vector<uint64_t>& allowed) {
  if (nodes_.size() > kMaxNodes || sets_.size() > kMaxSets) start_over();
  if (&trie != mask_trie_) forget_masks(&trie);
  if (auto kept = masks_.find(state_); kept != masks_.end()) {
    allowed = kept->second;
    return;
  }
  const size_t words = (static_cast<size_t>(trie.n_vocab()) + 63) / 64;
  allowed.assign(words, 0);
  visits_ = 0;
  walk(trie, trie.root(), state_, allowed);
  if (visits_ >= kMemoVisits && mask_bytes_ + words * 8 <= kMaxMaskBytes && nodes_.size() <= kMaxNodes &&
      sets_.size() <= kMaxSets) {  // a walk cut short by the caps is not kept
    masks_.emplace(state_, allowed);
    mask_bytes_ += words * 8;
  }
}

void Matcher::forget_masks(const TokenTrie* trie) {
  masks_.clear();
  mask_bytes_ = 0;
  mask_trie_ = trie;
}

void Matcher::walk(const TokenTrie& trie, const TokenTrie::Node& node, uint32_t set, std::vector<uint64_t>& allowed) {
  const ByteSet next = set_bytes_[set];  // a copy: step() may grow set_bytes_
  for (const TokenTrie::Node& child : trie.children(node)) {
    if (!next.has(child.byte)) continue;
    ++visits_;
    const uint32_t to = step(set, child.byte);
    if (to == kDead) continue;
    for (int32_t id : trie.tokens(child)) allowed[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    if (child.n_children > 0) walk(trie, child, to, allowed);
  }
}

}  // namespace th::grammar
