#include "tokenizer/spm_tokenizer.h"

#include <algorithm>
#include <utility>

#include "tokenizer/bigram_merge.h"
#include "tokenizer/unicode.h"

namespace th {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

// Emits a final piece: its token, else its bytes' tokens.
void emit_piece(const SpmModel& model, std::string_view piece, std::vector<int32_t>* out) {
  const int32_t id = model.index->find(piece);
  if (id >= 0) {
    out->push_back(id);
    return;
  }
  for (char c : piece) {
    const int32_t bt = model.byte_tokens[static_cast<uint8_t>(c)];
    if (bt >= 0) out->push_back(bt);
  }
}

struct SpmScratch {
  BigramScratch<float> by_score;
  BigramScratch<int32_t> by_rank;
  std::string key;
};

// One part of the text: the greedy merging of llama.cpp's llm_tokenizer_spm, or with ranks
// that of Hugging Face's BPE (a merge's result is always a token there: its loader checks).
void encode_part(const SpmModel& model, std::string_view text, SpmScratch* scratch, std::vector<int32_t>* out) {
  auto emit = [&](std::string_view piece) { emit_piece(model, piece, out); };
  if (model.ranks) {
    auto rank = [&](const MergeSymbol& l, const MergeSymbol& r, int32_t* p) {
      *p = model.ranks->rank(text.substr(l.offset, l.n), text.substr(r.offset, r.n), &scratch->key);
      return *p >= 0;
    };
    bigram_merge(text, &scratch->by_rank, rank, [](int32_t a, int32_t b) { return a < b; }, emit);
    return;
  }
  auto score = [&](const MergeSymbol& l, const MergeSymbol& r, float* p) {
    const int32_t id = model.index->find(text.substr(l.offset, l.n + r.n));
    if (id < 0) return false;
    *p = model.scores->empty() ? 0.0f : (*model.scores)[id];
    return true;
  };
  auto higher = [](float a, float b) { return a > b; };  // highest score first
  // A final symbol is a token unless it is a single character the vocab lacks.
  bigram_merge(text, &scratch->by_score, score, higher, emit);
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
  SpmScratch scratch;
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
    encode_part(model, part, &scratch, out);
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
