// Hyperparameters of a decoder-only transformer, read from GGUF metadata
// ({arch}.embedding_length and friends) and checked for consistency, and the
// per-architecture description (ArchSpec) of which tensors and options exist:
// the one forward pass (llama_model.cpp) reads the description, never the name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace th {

class GgufFile;

enum class Arch { Llama, Qwen2, Qwen3, Qwen3Moe, Gemma2, Gemma3, Phi3 };

enum class FfnAct { Silu, GeluTanh };  // the gated FFN's activation: SwiGLU or GeGLU

/// @brief What one architecture's GGUF holds and how its layers differ from Llama's.
struct ArchSpec {
  std::string_view name;  // general.architecture
  Arch arch;
  bool rope_neox = false;        // rotate halves (x_i, x_{i+d/2}) instead of adjacent pairs
  bool qkv_bias = false;         // attn_{q,k,v}.bias required (qwen2)
  bool qk_norm = false;          // attn_q_norm / attn_k_norm: per-head RMSNorm before RoPE (qwen3, gemma3)
  bool post_norms = false;       // attn_post_norm / ffn_post_norm on each block's output (gemma2/3)
  bool embd_scale = false;       // embeddings times sqrt(n_embd) (gemma)
  bool fused_qkv = false;        // attn_qkv may replace attn_q/k/v (phi3)
  bool fused_gate_up = false;    // ffn_up holds gate then up, no ffn_gate (phi3)
  bool moe = false;              // experts may replace the FFN (expert_count > 0; required for qwen3moe)
  bool output_is_embd = false;   // the embedding is the output matrix even if output.weight exists (gemma2)
  FfnAct act = FfnAct::Silu;
  int64_t swa_period = 0;        // default sliding_window_pattern: every period-th layer is global (0: none)
};

/// @brief The architectures tokenhive runs, or null.
const ArchSpec* find_arch(std::string_view name);
/// @brief The table's row of an architecture.
const ArchSpec& arch_spec(Arch arch);
/// @brief "llama, qwen2, ..." for messages.
std::string supported_arch_names();

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string arch_name;     // general.architecture
  const ArchSpec* spec = nullptr;
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
  float rope_attn_factor = 1.0f;  // rope.scaling.attn_factor: cos/sin scaled by it (phi3 longrope)
  int64_t rope_orig_ctx = 0;      // rope.scaling.original_context_length (phi3: long factors beyond it)
  // rope.scaling.type "llama3" (a Hugging Face folder's rope_scaling; a GGUF carries
  // rope_freqs.weight instead): the factors computed from its keys, else empty.
  std::vector<float> rope_freqs;

  float attn_scale = 0.0f;         // query scale; set to 1/sqrt(head_dim) or gemma's rule
  float attn_softcap = 0.0f;       // > 0: attention scores soft-capped (gemma2)
  float final_softcap = 0.0f;      // > 0: logits soft-capped (gemma2)
  int64_t sliding_window = 0;      // > 0: window of the sliding-window layers
  std::vector<uint8_t> layer_swa;  // per layer: 1 if it uses the sliding window (and the swa rope base)
  float rope_freq_base_swa = 10000.0f;  // the sliding-window layers' RoPE (gemma3: 10000, unscaled)
  float rope_freq_scale_swa = 1.0f;

  int64_t n_expert = 0;            // 0: dense FFN
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;            // each expert's FFN width

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
  bool is_swa(int64_t layer) const {
    return sliding_window > 0 && layer_swa[static_cast<size_t>(layer)] != 0;
  }
};

/// @brief Reads and validates the config; n_vocab comes from token_embd.weight.
Result<ModelConfig> config_from_gguf(const GgufFile& f);

/// @brief Llama 3.1's RoPE frequency factors (rope_dim/2 divisors of each frequency),
/// as Meta's reference and llama.cpp's converter compute them into rope_freqs.weight.
std::vector<float> llama3_rope_freq_factors(int64_t rope_dim, float freq_base, float factor,
                                            float low_freq_factor, float high_freq_factor,
                                            int64_t original_context);

}  // namespace th
