// RoPE's rotation angles, computed once and reused. The inverse frequencies
// depend only on the RoPE parameters (fixed per model), so they are kept per
// parameter set; cos/sin of (position, pair) are kept for the last list of
// positions, because every layer's q and k rotations (2 x n_layer calls per
// forward pass: 44 for TinyLlama) use the same positions. Values are computed
// exactly as the reference backend computes them (theta = position * inv_freq
// in f32, then std::cos / std::sin), so rotations match it bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace th::cpu {

class RopeCache {
 public:
  /// @brief cos and sin of every (token, pair): cos at [t * rot_dim/2 + i], sin likewise.
  struct Angles {
    const float* cos;
    const float* sin;
  };
  Angles angles(const RopeParams& p, const int32_t* pos, int64_t n_tokens);

 private:
  struct Freqs {
    int64_t rot_dim;
    float freq_base;
    std::vector<float> factors;  // copy of p.freq_factors (empty when null)
    std::vector<float> inv_freq;
  };
  const Freqs& freqs(const RopeParams& p);

  std::vector<std::unique_ptr<Freqs>> freqs_;  // one per parameter set seen (a model has one)
  // The angles of the last call.
  const Freqs* angles_freqs_ = nullptr;
  float angles_scale_ = 0;
  std::vector<int32_t> angles_pos_;
  std::vector<float> cos_, sin_;
};

}  // namespace th::cpu
