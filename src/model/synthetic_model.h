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
};

/// @brief The named shapes: "110m" (llama2.c stories110M), "1.1b" (TinyLlama), "7b" (Llama-2-7B).
Result<SyntheticShape> synthetic_shape(std::string_view name);

struct SyntheticSpec {
  SyntheticShape shape;
  DType type = DType::F16;    // of the weight matrices (norms are f32)
  Arch arch = Arch::Llama;    // qwen2 adds q/k/v biases
  bool tied_output = false;   // no output.weight: the embedding serves as output
  uint64_t seed = 1;
};

/// @brief Writes the model to `path`, taking every tokenizer.* key (and so the vocab size)
/// from `vocab`. Matrices must have row lengths that are multiples of the type's block size.
Status write_synthetic_model(const SyntheticSpec& spec, const GgufFile& vocab, const std::string& path);

}  // namespace th
