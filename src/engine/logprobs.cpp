#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace th {

double log_sum_exp(std::span<const float> logits) {
  float mx = -std::numeric_limits<float>::infinity();
  for (float x : logits) mx = std::max(mx, x);
  if (!std::isfinite(mx)) return static_cast<double>(mx);
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - mx);
  return mx + std::log(sum);
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int32_t k, double lse) {
  std::vector<TokenLogprob> all;
  all.reserve(logits.size());
  // NaN ranks as -inf, keeping the order strict.
  for (size_t i = 0; i < logits.size(); ++i)
    all.push_back({static_cast<int32_t>(i), std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i]});
  const size_t n = std::min(all.size(), static_cast<size_t>(std::max(k, 0)));
  auto better = [](const TokenLogprob& a, const TokenLogprob& b) {
    return a.logprob > b.logprob || (a.logprob == b.logprob && a.token < b.token);
  };
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(), better);
  all.resize(n);
  for (TokenLogprob& t : all) t.logprob = static_cast<float>(t.logprob - lse);
  return all;
}

}  // namespace th
