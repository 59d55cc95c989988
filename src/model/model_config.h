// Hyperparameters of a Llama-family model, read from GGUF metadata
// ({arch}.embedding_length and friends) and checked for consistency.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace th {

class GgufFile;

enum class Arch { Llama, Qwen2 };

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string arch_name;     // general.architecture
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_ff = 0;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  int64_t rope_dim = 0;      // rotated dimensions per head
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
  bool rope_neox = false;    // qwen2 rotates halves; llama adjacent pairs (as GGUF stores its weights)

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
};

/// @brief Reads and validates the config; n_vocab comes from token_embd.weight.
Result<ModelConfig> config_from_gguf(const GgufFile& f);

/// @brief Llama 3.1's RoPE frequency factors (rope_dim/2 divisors of each frequency),
/// as Meta's reference and llama.cpp's converter compute them into rope_freqs.weight.
std::vector<float> llama3_rope_freq_factors(int64_t rope_dim, float freq_base, float factor,
                                            float low_freq_factor, float high_freq_factor,
                                            int64_t original_context);

}  // namespace th
