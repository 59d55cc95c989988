// Numeric helpers several test files share: random inputs, the f32 summation error bound,
// argmax. (Each test directory compiles as one unity translation unit: helpers two files
// both need live here, not twice in the files.)
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace th::test {

/// n floats uniform in [lo, hi).
inline std::vector<float> random_floats(std::mt19937& rng, int64_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

/// The f32 unit roundoff.
inline constexpr double kU = 1.0 / (1 << 24);

/// gamma_n = n u / (1 - n u): the relative bound on any order of summing n products in f32.
inline double gamma(int64_t n) { return static_cast<double>(n) * kU / (1 - static_cast<double>(n) * kU); }

/// The index of the first largest of v[0..n).
inline int32_t argmax(const float* v, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = static_cast<int32_t>(i);
  return best;
}

}  // namespace th::test
