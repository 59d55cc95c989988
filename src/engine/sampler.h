// Turning logits into the next token: a chain of logits processors
// (penalties, temperature, top-k, top-p, min-p), then a draw from a
// counter-based RNG keyed by (seed, position). The draw is a pure function of
// the request's seed and the token's position, so the same request gives the
// same tokens wherever and whenever it runs, and a request resumed elsewhere
// (a continuation) goes on identically.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace th {

struct SamplingParams {
  float temperature = 0.8f;      // <= 0: greedy (argmax)
  int32_t top_k = 40;            // <= 0: off
  float top_p = 0.95f;           // >= 1: off
  float min_p = 0.05f;           // <= 0: off
  float repeat_penalty = 1.0f;   // 1: off (llama.cpp's --repeat-penalty)
  int32_t repeat_last_n = 64;    // window of recent tokens the penalties look at; -1: all
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;

  /// @brief A clear error for a value out of range (negative temperature, top_p > 1, ...).
  Status validate() const;
  bool greedy() const { return temperature <= 0.0f; }
};

/// @brief Uniform float in [0, 1) from Philox4x32-10 keyed by seed, counter = position.
float counter_uniform(uint64_t seed, uint64_t position);

class Sampler {
 public:
  explicit Sampler(SamplingParams params) : p_(params) {}
  const SamplingParams& params() const { return p_; }

  /// @brief The next token. `history` holds the tokens so far (prompt then generated),
  /// whose last repeat_last_n feed the penalties; `position` is the index the new token
  /// will have in the sequence (keys the RNG). `logits` may be modified.
  int32_t sample(std::span<float> logits, std::span<const int32_t> history,
                 uint64_t position) const;

 private:
  SamplingParams p_;
};

}  // namespace th
