// Log-probabilities under the model's raw distribution (softmax of the
// logits, before penalties and temperature): what a request that asks for
// logprobs is told about the tokens it got.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/request.h"

namespace th {

/// @brief log(sum(exp(logits))), computed stably (max subtracted first).
double log_sum_exp(std::span<const float> logits);

/// @brief The k most likely tokens (k <= logits.size()), most likely first, ties to the lower id,
/// with logprob = logit - lse.
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int32_t k, double lse);

}  // namespace th
