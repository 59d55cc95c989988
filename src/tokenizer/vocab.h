// A tokenizer's vocabulary as GGUF describes it (tokenizer.ggml.* keys).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace th {

class GgufFile;

enum class TokenizerModel { Spm, Bpe, Wpm };

/// Token attributes, as GGUF's tokenizer.ggml.token_type numbers them.
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

struct VocabData {
  TokenizerModel model = TokenizerModel::Spm;
  std::string pre;                    // tokenizer.ggml.pre ("default" when absent)
  std::vector<std::string> tokens;    // tokenizer.ggml.tokens
  std::vector<float> scores;          // tokenizer.ggml.scores (may be empty for BPE)
  std::vector<TokenType> types;       // tokenizer.ggml.token_type (Normal when absent)
  std::vector<std::string> merges;    // tokenizer.ggml.merges ("a b" per line; BPE only)
  int32_t bos = -1, eos = -1, unk = -1, pad = -1, eot = -1;
  bool add_bos = true;                // tokenizer.ggml.add_bos_token
  bool add_eos = false;               // tokenizer.ggml.add_eos_token
  bool add_space_prefix = true;       // tokenizer.ggml.add_space_prefix (SPM)
  // tokenhive.tokenizer.nfc: text is put in Unicode NFC before it is split (tokenizer.json's
  // "NFC" normalizer, Qwen 2/3). GGUF has no key for it: llama.cpp's converter drops it.
  bool nfc = false;
  // tokenhive.tokenizer.spm_merges: SPM text merged by `merges` ranks, not by scores (tokenizer.json's
  // byte_fallback BPE: Llama 2, Mistral, Gemma). GGUF has no key for it either.
  bool spm_merges = false;
};

/// @brief Reads tokenizer.ggml.* from a GGUF file, with llama.cpp's defaults for absent keys.
Result<VocabData> vocab_from_gguf(const GgufFile& f);

}  // namespace th
