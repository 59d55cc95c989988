#include "engine/compute_accuracy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kv/kv_cache.h"

namespace th {

namespace {

Result<std::vector<float>> all_logits(LlamaModel& model, Backend& backend, std::span<const int32_t> tokens,
                                      ComputeType type) {
  constexpr int64_t kBlock = 16;
  const int64_t n = static_cast<int64_t>(tokens.size());
  const ModelConfig& c = model.config();
  TH_ASSIGN_OR_RETURN(KvCache kv, KvCache::create(backend, c.n_layer, c.kv_dim(), (n + kBlock - 1) / kBlock, kBlock));
  std::vector<int32_t> table;
  if (!kv.reserve(table, n)) return Status::error("accuracy: KV cache too small");
  ForwardBatch b;
  b.tables = {table};
  for (int64_t p = 0; p < n; ++p) b.add(tokens[static_cast<size_t>(p)], 0, static_cast<int32_t>(p), p + 1 < n);
  std::vector<float> logits;
  TH_RETURN_IF_ERROR(model.forward(b, kv, &logits, type));
  return logits;
}

// log softmax in double.
std::vector<double> log_softmax(const float* x, size_t n) {
  double mx = -INFINITY;
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(x[i]));
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(x[i] - mx);
  const double lse = mx + std::log(sum);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] - lse;
  return out;
}

}  // namespace

Result<ComputeAccuracy> compare_compute_types(LlamaModel& model, Backend& backend, std::span<const int32_t> tokens,
                                              ComputeType ref, ComputeType type) {
  if (tokens.size() < 2) return Status::error("accuracy: need at least 2 tokens");
  TH_ASSIGN_OR_RETURN(std::vector<float> a, all_logits(model, backend, tokens, ref));
  TH_ASSIGN_OR_RETURN(std::vector<float> b, all_logits(model, backend, tokens, type));
  const size_t nv = static_cast<size_t>(model.config().n_vocab);
  ComputeAccuracy r;
  r.positions = static_cast<int64_t>(tokens.size()) - 1;
  int64_t agree = 0;
  double sq = 0;
  for (int64_t p = 0; p < r.positions; ++p) {
    const float* pa = a.data() + p * nv;
    const float* pb = b.data() + p * nv;
    const std::vector<double> la = log_softmax(pa, nv), lb = log_softmax(pb, nv);
    double mean = 0;
    for (size_t i = 0; i < nv; ++i) mean += pa[i];
    mean /= static_cast<double>(nv);
    for (size_t i = 0; i < nv; ++i) sq += (pa[i] - mean) * (pa[i] - mean);
    double kl = 0;
    for (size_t i = 0; i < nv; ++i) kl += std::exp(la[i]) * (la[i] - lb[i]);
    kl = std::max(kl, 0.0);  // rounding can take an exact 0 below it
    r.mean_kl += kl;
    r.max_kl = std::max(r.max_kl, kl);
    agree += (std::max_element(pa, pa + nv) - pa) == (std::max_element(pb, pb + nv) - pb);
  }
  r.mean_kl /= static_cast<double>(r.positions);
  r.ref_logit_rms = std::sqrt(sq / static_cast<double>(r.positions) / static_cast<double>(nv));
  r.top1_agreement = static_cast<double>(agree) / static_cast<double>(r.positions);
  return r;
}

namespace {
// Significand bits of a type's weights (the implicit one included): relative rounding 2^-p.
int significand_bits(ComputeType type) {
  switch (type) {
    case ComputeType::Bf16: return 8;
    case ComputeType::Fp16: return 11;
    case ComputeType::Fp8: return 4;
    default: return 0;
  }
}
}  // namespace

double top1_bound(ComputeType type, int64_t n_layer) {
  const int p = significand_bits(type);
  if (p == 0) return 1;
  const double sigma_over_l = std::ldexp(1.0, -p) * std::sqrt(static_cast<double>(2 * n_layer + 1) / 3);
  return std::max(0.0, 1 - 2 * sigma_over_l);
}

double kl_bound(ComputeType type, int64_t n_layer, double logit_rms) {
  const int p = significand_bits(type);
  if (p == 0) return 0;
  const double rel = std::ldexp(1.0, -p);
  return logit_rms * logit_rms * rel * rel * static_cast<double>(2 * n_layer + 1) / 6;
}

}  // namespace th
