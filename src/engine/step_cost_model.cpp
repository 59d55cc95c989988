#include "engine/step_cost_model.h"

#include <algorithm>

namespace th {

namespace {

// Features are fit divided by these, so the four directions have like magnitudes (a step has
// tens of decodes, hundreds of prompt tokens, ~1e5 KV positions) and P stays well conditioned.
constexpr std::array<double, StepCostModel::kN> kScale = {1.0, 64.0, 512.0, 65536.0};
// P's starting diagonal (scaled units): a vague prior, so the first steps set the fit.
constexpr double kPrior = 1e3;
// Above this trace P is no longer divided by lambda: without it, a direction the traffic does
// not excite (no prompt tokens for a minute) winds P up until one noisy step moves the fit far.
constexpr double kMaxTrace = 1e5;

}  // namespace

StepCostModel::StepCostModel(double forgetting) : lambda_(std::clamp(forgetting, 0.5, 1.0)), scale_(kScale) {
  for (int i = 0; i < kN; ++i) p_[i][i] = kPrior;
}

void StepCostModel::observe(const StepFeatures& f, double seconds) {
  if (f.decode_tokens + f.prefill_tokens <= 0 || !(seconds >= 0)) return;
  const std::array<double, kN> x = {1.0, static_cast<double>(f.decode_tokens) / scale_[1],
                                    static_cast<double>(f.prefill_tokens) / scale_[2],
                                    static_cast<double>(f.kv_read) / scale_[3]};
  std::array<double, kN> px{};  // P x
  for (int i = 0; i < kN; ++i)
    for (int j = 0; j < kN; ++j) px[i] += p_[i][j] * x[j];
  double xpx = 0, pred = 0;
  for (int i = 0; i < kN; ++i) {
    xpx += x[i] * px[i];
    pred += x[i] * theta_[i] * scale_[i];  // theta_ holds unscaled coefficients
  }
  const double denom = lambda_ + xpx;
  const double err = seconds - pred;
  double trace = 0;
  for (int i = 0; i < kN; ++i) trace += p_[i][i];
  const double forget = trace > kMaxTrace ? 1.0 : lambda_;
  for (int i = 0; i < kN; ++i) {
    // Unconstrained: clamping a coefficient at 0 here (a projected update) made the fit diverge
    // within 200 steps on decode-heavy traffic, where decodes and the KV they read move together;
    // predict() clamps the total instead and the sizing checks each marginal cost's sign.
    theta_[i] += px[i] / denom * err / scale_[i];
    for (int j = 0; j < kN; ++j) p_[i][j] = (p_[i][j] - px[i] * px[j] / denom) / forget;
  }
  ++samples_;
}

double StepCostModel::predict(const StepFeatures& f) const {
  const double t = theta_[0] + theta_[1] * static_cast<double>(f.decode_tokens) +
                   theta_[2] * static_cast<double>(f.prefill_tokens) + theta_[3] * static_cast<double>(f.kv_read);
  return std::max(0.0, t);
}

}  // namespace th
