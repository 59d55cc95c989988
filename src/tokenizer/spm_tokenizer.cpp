#include "tokenizer/spm_tokenizer.h"

#include <algorithm>
#include <queue>
#include <utility>

#include "tokenizer/unicode.h"

namespace th {

namespace {

struct Symbol {
  int prev;
  int next;
  uint32_t offset;
  uint32_t n;  // 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  uint32_t size;
};

// Highest score first; on a tie the leftmost pair. Sizes only grow as symbols
// merge, so a queued pair is still current exactly when its two sizes add up.
struct BigramLess {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

}  // namespace

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

// One part of the text: the greedy merging of llama.cpp's llm_tokenizer_spm.
void encode_part(const SpmModel& model, std::string_view text, std::vector<Symbol>& symbols,
                 std::vector<int32_t>* out) {
  symbols.clear();
  for (size_t offs = 0; offs < text.size();) {
    // Like llama.cpp: the lead byte alone says how long a character is, so a
    // broken sequence may swallow the bytes after it; they come out as bytes.
    const size_t n = std::min(unicode::utf8_len(text[offs]), text.size() - offs);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, offs + n == text.size() ? -1 : index + 1,
                       static_cast<uint32_t>(offs), static_cast<uint32_t>(n)});
    offs += n;
  }
  if (symbols.empty()) return;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue;
  auto try_add = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    const uint32_t size = symbols[left].n + symbols[right].n;
    const int32_t id = model.index->find(text.substr(symbols[left].offset, size));
    if (id < 0) return;
    const float score = model.scores->empty() ? 0.0f : (*model.scores)[id];
    queue.push({left, right, score, size});
  };

  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    Symbol& r = symbols[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  // A final symbol is a token unless it is a single character the vocab lacks.
  for (int i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].offset, symbols[i].n);
    const int32_t id = model.index->find(piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    for (char c : piece) {
      const int32_t bt = model.byte_tokens[static_cast<uint8_t>(c)];
      if (bt >= 0) out->push_back(bt);
    }
  }
}

}  // namespace

void spm_index_spaces(const std::vector<std::string>& tokens, SpmModel* model) {
  model->byte_before_space.fill(false);
  for (const std::string& t : tokens)
    for (size_t p = t.find(kSpace, 1); p != std::string::npos; p = t.find(kSpace, p + 1))
      model->byte_before_space[static_cast<uint8_t>(t[p - 1])] = true;
}

void spm_encode(const SpmModel& model, std::string_view text, std::vector<int32_t>* out) {
  // A merge joins two adjacent symbols into a token, so no merge can cross a
  // point that no token spans: cut before each U+2581 whose preceding byte
  // never precedes one inside a token. The parts (mostly words) repeat, so
  // their ids are remembered for the rest of the call.
  constexpr size_t kMaxCachedPart = 64, kMaxCacheEntries = 1 << 16;
  std::vector<Symbol> symbols;
  StringTable cache;
  std::vector<std::pair<uint32_t, uint32_t>> cache_spans;
  std::vector<int32_t> cache_ids;
  auto encode_cached = [&](std::string_view part) {
    const bool cacheable = part.size() <= kMaxCachedPart;
    if (cacheable) {
      if (const int32_t c = cache.find(part); c >= 0) {
        const auto [at, n] = cache_spans[c];
        out->insert(out->end(), cache_ids.begin() + at, cache_ids.begin() + at + n);
        return;
      }
    }
    const size_t before = out->size();
    encode_part(model, part, symbols, out);
    if (cacheable && cache.size() < kMaxCacheEntries) {
      cache.insert(part, static_cast<int32_t>(cache_spans.size()));
      cache_spans.emplace_back(static_cast<uint32_t>(cache_ids.size()),
                               static_cast<uint32_t>(out->size() - before));
      cache_ids.insert(cache_ids.end(), out->begin() + before, out->end());
    }
  };
  size_t part = 0;
  for (size_t offs = 0; offs < text.size();) {
    const size_t n = std::min(unicode::utf8_len(text[offs]), text.size() - offs);
    if (offs > part && text.compare(offs, kSpace.size(), kSpace) == 0 &&
        !model.byte_before_space[static_cast<uint8_t>(text[offs - 1])]) {
      encode_cached(text.substr(part, offs - part));
      part = offs;
    }
    offs += n;
  }
  encode_cached(text.substr(part));
}

}  // namespace th
