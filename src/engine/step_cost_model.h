// What one engine step costs, learned online: seconds as a linear function of the step's
// decode tokens, prompt (prefill) tokens and KV positions its attention reads,
//   t = c0 + c_decode * decode + c_prefill * prefill + c_kv * kv_read,
// refit after every step by recursive least squares with forgetting, so it follows the
// machine (another tenant's load, a thermal limit) without keeping a history. The SLO
// step sizing (slo_policy.h) inverts it; /metrics exports the coefficients.
#pragma once

#include <array>
#include <cstdint>

namespace th {

struct StepFeatures {
  int64_t decode_tokens = 0;   // sequences computing their one next token
  int64_t prefill_tokens = 0;  // prompt tokens (chunks, recomputation) computed this step
  int64_t kv_read = 0;         // sum over the step's tokens of the positions each attends to
};

class StepCostModel {
 public:
  static constexpr int kN = 4;  // c0, c_decode, c_prefill, c_kv
  /// @brief `forgetting` in (0, 1]: each step's weight relative to the one after it. 0.98
  /// keeps an effective memory of about 50 steps: a few seconds of traffic.
  explicit StepCostModel(double forgetting = 0.98);

  /// @brief One measured step. Steps with no token teach nothing and are ignored.
  void observe(const StepFeatures& f, double seconds);
  /// @brief Predicted seconds of a step (never negative).
  double predict(const StepFeatures& f) const;
  /// @brief Steps observed; the sizing trusts the fit only after a few (kWarmSteps).
  int64_t samples() const { return samples_; }
  bool ready() const { return samples_ >= kWarmSteps; }
  static constexpr int64_t kWarmSteps = 8;
  /// @brief c0, c_decode, c_prefill, c_kv (seconds, seconds per token, per KV position).
  const std::array<double, kN>& coefficients() const { return theta_; }

 private:
  double lambda_;
  std::array<double, kN> theta_{};
  std::array<std::array<double, kN>, kN> p_{};  // inverse covariance, scaled
  std::array<double, kN> scale_{};             // feature scales: the fit is on x / scale
  int64_t samples_ = 0;
};

}  // namespace th
