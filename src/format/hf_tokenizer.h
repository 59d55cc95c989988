// A Hugging Face tokenizer.json (+ tokenizer_config.json) as the tokenizer.ggml.* metadata
// llama.cpp's converter writes for it, so the tokenizer loads through the one GGUF path.
// Byte-level BPE only (GPT-2, Llama 3, Qwen 2/3): its vocabulary, merges, added and
// special tokens, and the pre-tokenizer named by its regex.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"

namespace th {

struct HfTokenizerInput {
  std::string_view tokenizer_json;    // the text of tokenizer.json
  std::string tokenizer_json_name;    // its path, for errors
  std::string_view tokenizer_config;  // tokenizer_config.json's text, or "" when absent
  std::string tokenizer_config_name;
  int64_t n_vocab = 0;                // config.json's vocab_size (the embedding's rows); 0: the tokenizer's own
  int64_t bos = -1, eos = -1;         // config.json's bos/eos_token_id, used when tokenizer_config names none
};

/// @brief tokenizer.ggml.* (model, pre, tokens, token_type, merges, bos/eos ids, add_bos_token)
/// and tokenizer.chat_template. An error names the file and the field.
Result<std::vector<std::pair<std::string, GgufValue>>> hf_tokenizer_metadata(const HfTokenizerInput& in);

/// @brief The HF pre-tokenizer regex of a tokenizer.ggml.pre name, "" for ByteLevel's own
/// (GPT-2's), or null when there is none (mkmodel --format hf writes it back).
const char* hf_pre_tokenizer_regex(std::string_view pre);

}  // namespace th
