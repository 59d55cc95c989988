// Byte-level BPE encoding of one pre-tokenized word, as llama.cpp's
// llm_tokenizer_bpe_session does it: start from the word's characters and
// keep applying the lowest-ranked merge among adjacent pairs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/bigram_merge.h"
#include "tokenizer/token_index.h"

namespace th {

/// tokenizer.ggml.merges: "left right" -> rank (its position; the first of repeats wins).
class BpeRanks {
 public:
  /// @brief Fails on a merge that is not two parts around a space.
  static Result<BpeRanks> create(const std::vector<std::string>& merges);

  /// @brief The rank of merging `left` and `right`, or -1. `scratch` avoids
  /// an allocation per look-up.
  int32_t rank(std::string_view left, std::string_view right, std::string* scratch) const;

 private:
  StringTable ranks_;
};

/// Buffers one encode call reuses across its words.
struct BpeScratch {
  BigramScratch<int32_t> merge;  // priority: the merge rank
  std::string key;
};

/// @brief Appends the ids of one byte-level encoded `word` to `out`. With
/// `ignore_merges`, a word that is itself a token is taken whole.
void bpe_encode_word(std::string_view word, const TokenIndex& index, const BpeRanks& ranks,
                     bool ignore_merges, BpeScratch* scratch, std::vector<int32_t>* out);

}  // namespace th
