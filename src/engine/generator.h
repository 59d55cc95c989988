// One sequence, start to finish: prefill the prompt in chunks, then sample and
// decode token by token until a stop condition. What `tokenhive generate` runs;
// the serving engine batches many of these.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"
#include "engine/finish_reason.h"
#include "engine/sampler.h"
#include "model/llama_model.h"

namespace th {

struct GenerateOptions {
  SamplingParams sampling;
  int64_t max_tokens = -1;   // -1: until a stop token or the context is full
  int64_t n_ctx = 0;         // 0: the model's training context
  int64_t n_batch = 512;     // prompt tokens per forward pass (chunked prefill)
  bool ignore_eos = false;
  ComputeType compute_type = ComputeType::Native;  // must be loaded in the model
};

struct GenerateStats {
  int64_t n_prompt = 0;
  int64_t n_generated = 0;
  double prompt_seconds = 0;
  double generate_seconds = 0;
  FinishReason finish = FinishReason::Length;
};

class Generator {
 public:
  /// @brief `end_of_generation`: the tokens that stop generation unless ignore_eos; the caller
  /// takes them from its vocab (the tokenizer's end_of_generation_ids).
  Generator(LlamaModel& model, Backend& backend, std::vector<int32_t> end_of_generation);

  /// @brief Generates after `prompt` (which must not be empty; start with BOS for "from BOS").
  /// `on_token` sees each generated token; returning false cancels.
  /// Generation stops at one of the end-of-generation tokens unless ignore_eos, at max_tokens, or when the context is full.
  Result<GenerateStats> run(const std::vector<int32_t>& prompt, const GenerateOptions& opt,
                            const std::function<bool(int32_t)>& on_token);

 private:
  LlamaModel* model_;
  Backend* backend_;
  std::vector<int32_t> end_of_generation_;  // sorted
};

}  // namespace th
