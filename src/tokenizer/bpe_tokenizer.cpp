#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace th {

Result<BpeRanks> BpeRanks::create(const std::vector<std::string>& merges) {
  BpeRanks r;
  r.ranks_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    // llama.cpp splits at the first space after the first byte.
    const size_t pos = m.find(' ', 1);
    if (pos == std::string::npos || pos + 1 == m.size())
      return Status::errorf("tokenizer.ggml.merges[", i, "] = '", m,
                            "' is not two tokens separated by a space");
    r.ranks_.insert(m, static_cast<int32_t>(i));
  }
  return r;
}

int32_t BpeRanks::rank(std::string_view left, std::string_view right, std::string* key) const {
  // Byte-level words have no spaces, so "left right" names the pair exactly.
  if (left.find(' ') != std::string_view::npos || right.find(' ') != std::string_view::npos)
    return -1;
  key->assign(left);
  key->push_back(' ');
  key->append(right);
  return ranks_.find(*key);
}

namespace {

// Lowest rank first, then leftmost: a max-heap comparator.
bool bigram_after(const BpeScratch::Bigram& l, const BpeScratch::Bigram& r) {
  return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
}

}  // namespace

void bpe_encode_word(std::string_view word, const TokenIndex& index, const BpeRanks& ranks,
                     bool ignore_merges, BpeScratch* s, std::vector<int32_t>* out) {
  if (word.empty()) return;
  if (ignore_merges) {
    const int32_t id = index.find(word);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  auto& symbols = s->symbols;
  auto& heap = s->heap;
  symbols.clear();
  heap.clear();
  for (size_t offs = 0; offs < word.size();) {
    const size_t n = std::min(unicode::utf8_len(word[offs]), word.size() - offs);
    const int i = static_cast<int>(symbols.size());
    symbols.push_back({i - 1, offs + n == word.size() ? -1 : i + 1, static_cast<uint32_t>(offs),
                       static_cast<uint32_t>(n)});
    offs += n;
  }

  auto add = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    const auto& l = symbols[left];
    const auto& r = symbols[right];
    const int32_t rank =
        ranks.rank(word.substr(l.offset, l.n), word.substr(r.offset, r.n), &s->key);
    if (rank < 0) return;
    heap.push_back({left, right, rank, l.n + r.n});
    std::push_heap(heap.begin(), heap.end(), bigram_after);
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) add(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), bigram_after);
    const BpeScratch::Bigram b = heap.back();
    heap.pop_back();
    auto& l = symbols[b.left];
    auto& r = symbols[b.right];
    // Sizes only grow, so a pair whose sizes still add up is unchanged
    // (llama.cpp compares the texts, which comes to the same).
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    add(l.prev, b.left);
    add(b.left, l.next);
  }

  for (int i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = word.substr(symbols[i].offset, symbols[i].n);
    const int32_t id = index.find(piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    // As llama.cpp: look each byte up on its own; bytes that are no token are dropped.
    for (size_t j = 0; j < piece.size(); ++j) {
      const int32_t bid = index.find(piece.substr(j, 1));
      if (bid >= 0) out->push_back(bid);
    }
  }
}

}  // namespace th
