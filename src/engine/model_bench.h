// Timed forward passes for `tokenhive bench model`: prefill of one long prompt,
// and decode of one or many sequences a token per step. Token ids are random
// (fixed seed) but valid: speed does not depend on which tokens they are, and
// no tokenizer or sampler time is counted. Every run gets a fresh KV cache.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "base/status.h"
#include "model/llama_model.h"

namespace th {

/// @brief Seconds to run an n_prompt-token prompt through the model in chunks of `ubatch`
/// tokens (one forward pass each; logits for the last token only), into an empty cache of
/// kv_type (f16 by default, as llama.cpp's).
Result<double> time_prefill(LlamaModel& model, Backend& backend, int64_t n_prompt, int64_t ubatch, uint64_t seed,
                            ComputeType type = ComputeType::Native, DType kv_type = DType::F16);

/// @brief Seconds for n_steps decode steps of n_seqs sequences at once: each step is one
/// forward pass of n_seqs tokens (one per sequence, each wanting logits). Before the clock
/// starts, each sequence gets an n_context-token prompt (n_context >= 1), prefilled together.
Result<double> time_decode(LlamaModel& model, Backend& backend, int64_t n_seqs, int64_t n_context, int64_t n_steps,
                           uint64_t seed, ComputeType type = ComputeType::Native, DType kv_type = DType::F16);

}  // namespace th
