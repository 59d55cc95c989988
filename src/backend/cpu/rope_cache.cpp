#include "backend/cpu/rope_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace th::cpu {

const RopeCache::Freqs& RopeCache::freqs(const RopeParams& p) {
  const int64_t half = p.rot_dim / 2;
  for (const std::unique_ptr<Freqs>& fp : freqs_) {
    const Freqs& f = *fp;
    if (f.rot_dim != p.rot_dim || f.freq_base != p.freq_base) continue;
    if (p.freq_factors == nullptr ? f.factors.empty()
                                  : !f.factors.empty() && std::equal(f.factors.begin(), f.factors.end(), p.freq_factors))
      return f;
  }
  auto fp = std::make_unique<Freqs>(Freqs{p.rot_dim, p.freq_base, {}, std::vector<float>(static_cast<size_t>(half))});
  Freqs& f = *fp;
  if (p.freq_factors) f.factors.assign(p.freq_factors, p.freq_factors + half);
  for (int64_t i = 0; i < half; ++i) {
    float v = 1.0f / std::pow(p.freq_base, static_cast<float>(2 * i) / static_cast<float>(p.rot_dim));
    if (p.freq_factors) v /= p.freq_factors[i];
    f.inv_freq[static_cast<size_t>(i)] = v;
  }
  freqs_.push_back(std::move(fp));
  return f;
}

RopeCache::Angles RopeCache::angles(const RopeParams& p, const int32_t* pos, int64_t n_tokens) {
  const Freqs& f = freqs(p);
  const int64_t half = p.rot_dim / 2;
  const bool same = angles_freqs_ == &f && angles_scale_ == p.freq_scale &&
                    angles_pos_.size() == static_cast<size_t>(n_tokens) &&
                    std::equal(angles_pos_.begin(), angles_pos_.end(), pos);
  if (!same) {
    angles_freqs_ = &f;
    angles_scale_ = p.freq_scale;
    angles_pos_.assign(pos, pos + n_tokens);
    cos_.resize(static_cast<size_t>(n_tokens * half));
    sin_.resize(static_cast<size_t>(n_tokens * half));
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float position = static_cast<float>(pos[t]) * p.freq_scale;
      for (int64_t i = 0; i < half; ++i) {
        const float theta = position * f.inv_freq[static_cast<size_t>(i)];
        cos_[static_cast<size_t>(t * half + i)] = std::cos(theta);
        sin_[static_cast<size_t>(t * half + i)] = std::sin(theta);
      }
    }
  }
  return {cos_.data(), sin_.data()};
}

}  // namespace th::cpu
