#include "tokenizer/bpe_tokenizer.h"

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
  auto rank = [&](const MergeSymbol& l, const MergeSymbol& r, int32_t* p) {
    *p = ranks.rank(word.substr(l.offset, l.n), word.substr(r.offset, r.n), &s->key);
    return *p >= 0;
  };
  auto lower = [](int32_t a, int32_t b) { return a < b; };  // lowest rank first
  bigram_merge(word, &s->merge, rank, lower, [&](std::string_view piece) {
    const int32_t id = index.find(piece);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
    // As llama.cpp: look each byte up on its own; bytes that are no token are dropped.
    for (size_t j = 0; j < piece.size(); ++j) {
      const int32_t bid = index.find(piece.substr(j, 1));
      if (bid >= 0) out->push_back(bid);
    }
  });
}

}  // namespace th
