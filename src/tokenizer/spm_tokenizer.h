// SentencePiece-style (SPM) encoding as llama.cpp's llm_tokenizer_spm does it:
// start from UTF-8 characters and keep merging the adjacent pair whose union
// is the highest-scoring token; what is left that is no token falls back to
// byte tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/token_index.h"

namespace th {

struct SpmModel {
  const TokenIndex* index = nullptr;
  const std::vector<float>* scores = nullptr;  // empty: every score is 0
  // Set: pairs merge by these ranks, lowest first, and only pairs they list (tokenizer.json's
  // byte_fallback BPE) instead of by the score of the token they make.
  const BpeRanks* ranks = nullptr;
  // Token for each byte: <0xNN>, else the one-byte token, else unk, else -1 (dropped).
  std::array<int32_t, 256> byte_tokens{};
  // Bytes that some token has right before a U+2581 inside it. Where a U+2581
  // follows any other byte no token can span the two, so the text is split
  // there and each part merged on its own: same result, small queues.
  std::array<bool, 256> byte_before_space{};
};

/// @brief Fills model->byte_before_space from the token texts.
void spm_index_spaces(const std::vector<std::string>& tokens, SpmModel* model);

/// @brief Appends the ids of `text` (spaces already escaped to U+2581) to `out`.
void spm_encode(const SpmModel& model, std::string_view text, std::vector<int32_t>* out);

}  // namespace th
