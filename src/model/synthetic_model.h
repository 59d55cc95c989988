// Synthetic Llama-family GGUF files of real shapes with random weights: what
// benchmarks and tests use when the real model is too big to carry. The values
// are scaled so activations stay finite through every layer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "model/model_config.h"
#include "tensor/dtype.h"

namespace th {

class GgufFile;

struct SyntheticShape {
  std::string name;
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0, n_ctx = 2048;
  int64_t head_dim = 0;  // 0: n_embd / n_head
};

/// @brief The named shapes: "tiny" (64 wide, 2 layers: tests), "110m" (llama2.c stories110M),
/// "1.1b" (TinyLlama), "7b" (Llama-2-7B).
Result<SyntheticShape> synthetic_shape(std::string_view name);

struct SyntheticSpec {
  SyntheticShape shape;
  DType type = DType::F16;    // of the weight matrices (norms are f32)
  Arch arch = Arch::Llama;    // the tensors and keys of that architecture (model_config.h)
  bool tied_output = false;   // no output.weight: the embedding serves as output (always for gemma2)
  int64_t n_expert = 0;       // > 0: a mixture of experts (llama: Mixtral; qwen3moe: required)
  int64_t n_expert_used = 0;
  bool llama3_rope = false;   // llama: Llama 3.1's rope_freqs.weight and rope base 500000
  int64_t sliding_window = 0; // llama: > 0, Mistral's window on every layer (llama.attention.sliding_window)
  bool yarn = false;          // YaRN x4 past the shape's context (as Qwen2.5/Qwen3 long-context configs)
  uint64_t seed = 1;
};

/// @brief The spec's fields for an `mkmodel --arch` name: an architecture of model_config.h,
/// or "mixtral" (llama with 8 experts, 2 used; 4 in the tiny shape), "llama3" (llama with
/// Llama 3.1's rope scaling), "mistral" (llama with a sliding window on every layer: 4096,
/// 5 in the tiny shape) or "qwen2-yarn" (qwen2 with YaRN rope scaling x4). Returns an error naming the known names otherwise.
Status apply_synthetic_arch(std::string_view name, SyntheticSpec& spec);

/// @brief config.json's rope_scaling for the spec (Llama 3.1's factors that write_synthetic_model's
/// rope_freqs.weight holds), as JSON text; "" when it has none or its GGUF keys say it.
std::string synthetic_hf_rope_scaling(const SyntheticSpec& spec);

/// @brief Writes the model to `path`, taking every tokenizer.* key (and so the vocab size)
/// from `vocab`. Matrices must have row lengths that are multiples of the type's block size.
Status write_synthetic_model(const SyntheticSpec& spec, const GgufFile& vocab, const std::string& path);

}  // namespace th
