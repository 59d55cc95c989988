// The merge loop SPM and BPE share (llama.cpp's llm_tokenizer_spm and
// llm_tokenizer_bpe_session): start from the UTF-8 characters of a text and
// keep merging the best adjacent pair until no pair merges. The two differ
// only in what "best" is (SPM: the highest-scoring token the pair makes; BPE:
// the lowest merge rank), which the caller supplies, and in what they do
// with a final piece that is no token, which stays with them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/unicode.h"

namespace th {

struct MergeSymbol {
  int prev;
  int next;
  uint32_t offset;
  uint32_t n;  // 0 once merged into its left neighbour
};

/// Buffers one encode call reuses across its words or parts.
template <typename Priority>
struct BigramScratch {
  struct Bigram {
    int left;
    int right;
    Priority priority;
    uint32_t size;
  };
  std::vector<MergeSymbol> symbols;
  std::vector<Bigram> heap;
};

/// @brief Merges the characters of `text` and calls `emit(piece)` for each
/// final piece, left to right.
///
/// `priority(left, right, &p)` says whether the adjacent symbols may merge and
/// how good that is; `before(a, b)` is true when priority a merges before b.
/// Among equal priorities the leftmost pair goes first. Sizes only grow as
/// symbols merge, so a queued pair is still current exactly when its two
/// sizes add up (llama.cpp compares the texts, which comes to the same).
template <typename Priority, typename PriorityFn, typename Before, typename Emit>
void bigram_merge(std::string_view text, BigramScratch<Priority>* s, PriorityFn&& priority, Before before,
                  Emit&& emit) {
  using Bigram = typename BigramScratch<Priority>::Bigram;
  auto& symbols = s->symbols;
  auto& heap = s->heap;
  symbols.clear();
  heap.clear();
  for (size_t offs = 0; offs < text.size();) {
    // Like llama.cpp: the lead byte alone says how long a character is, so a
    // broken sequence may swallow the bytes after it; they come out as bytes.
    const size_t n = std::min(unicode::utf8_len(text[offs]), text.size() - offs);
    const int i = static_cast<int>(symbols.size());
    symbols.push_back({i - 1, offs + n == text.size() ? -1 : i + 1, static_cast<uint32_t>(offs),
                       static_cast<uint32_t>(n)});
    offs += n;
  }
  if (symbols.empty()) return;

  // A max-heap comparator: true when `l` comes out after `r`.
  auto after = [&before](const Bigram& l, const Bigram& r) {
    return before(r.priority, l.priority) || (l.priority == r.priority && l.left > r.left);
  };
  auto add = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    Priority p;
    if (!priority(symbols[left], symbols[right], &p)) return;
    heap.push_back({left, right, p, symbols[left].n + symbols[right].n});
    std::push_heap(heap.begin(), heap.end(), after);
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) add(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), after);
    const Bigram b = heap.back();
    heap.pop_back();
    MergeSymbol& l = symbols[b.left];
    MergeSymbol& r = symbols[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    add(l.prev, b.left);
    add(b.left, l.next);
  }

  for (int i = 0; i != -1; i = symbols[i].next) emit(text.substr(symbols[i].offset, symbols[i].n));
}

}  // namespace th
