// Turning logits into the next token: a chain of logits processors in
// llama.cpp's default order (penalties, top-k, top-p, min-p, temperature),
// then a draw from a counter-based RNG keyed by (seed, position). The draw is
// a pure function of the request's seed and the token's position, so the same
// request gives the same tokens wherever and whenever it runs, and a request
// resumed elsewhere (a continuation) goes on identically.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace th {

struct SamplingParams {
  float temperature = 0.8f;        // <= 0: greedy (argmax); must be finite
  int32_t top_k = 40;              // 0: off
  float top_p = 0.95f;             // in (0, 1]; 1: off
  float min_p = 0.05f;             // in [0, 1]; 0: off
  float repeat_penalty = 1.0f;     // > 0; 1: off (llama.cpp's --repeat-penalty)
  int32_t repeat_last_n = 64;      // window of recent tokens all penalties look at; -1: all, 0: off
  float presence_penalty = 0.0f;   // in [-2, 2] (OpenAI's range)
  float frequency_penalty = 0.0f;  // in [-2, 2]
  uint64_t seed = 0;

  /// @brief A clear error, naming the field, for a value out of range.
  Status validate() const;
  bool greedy() const { return temperature <= 0.0f; }
};

/// @brief Uniform float in [0, 1) from Philox4x32-10 keyed by seed, counter = position:
/// the top 24 bits of the first output word, times 2^-24.
float counter_uniform(uint64_t seed, uint64_t position);

/// @brief A token and its processed logit, as the sampler's candidate list holds them.
struct TokenLogit {
  float logit;
  int32_t id;
};

/// One per request (or per sequence): sample() reuses scratch buffers held
/// here, so a Sampler is not for concurrent calls; copies are independent.
class Sampler {
 public:
  explicit Sampler(SamplingParams params) : p_(params) {}
  const SamplingParams& params() const { return p_; }

  /// @brief The next token. `history` holds the tokens so far (prompt then generated),
  /// whose last repeat_last_n feed the penalties; `position` is the index the new token
  /// will have in the sequence (keys the RNG). `logits` may be modified (the penalties
  /// are applied in place). The result depends on nothing but (logits, history, params,
  /// position). NaN logits count as -inf; if every logit is -inf or NaN the result is 0;
  /// empty logits give -1. Params are expected to have passed validate().
  int32_t sample(std::span<float> logits, std::span<const int32_t> history, uint64_t position);

 private:
  void apply_penalties(std::span<float> logits, std::span<const int32_t> history);
  void collect_candidates(std::span<const float> logits);

  SamplingParams p_;
  std::vector<TokenLogit> cand_;  // scratch: the tokens still in the running
  std::vector<int32_t> window_;   // scratch: the penalty window, sorted to count repeats
};

}  // namespace th
