// Seeded random numbers for the load generator, written out rather than taken from
// <random>'s distributions, whose algorithms differ between standard libraries: the
// same --seed gives the same workload and schedule on every platform.
#pragma once

#include <cmath>
#include <cstdint>

namespace th::bench {

/// @brief SplitMix64's finalizer: a well-mixed 64-bit value of x.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// @brief xoshiro256** seeded through SplitMix64, with the few draws the bench needs.
class BenchRng {
 public:
  explicit BenchRng(uint64_t seed) {
    for (uint64_t& w : s_) w = seed = mix64(seed);
  }
  /// @brief A generator for item `index` of a stream: reproducible whatever else was drawn.
  static BenchRng for_item(uint64_t seed, uint64_t stream, uint64_t index) {
    return BenchRng(mix64(seed ^ mix64(stream * 0x100000001b3ULL ^ mix64(index))));
  }

  uint64_t next() {
    const uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  /// @brief Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// @brief Uniform integer in [lo, hi], both included (lo <= hi); rejection keeps it unbiased.
  int64_t uniform_int(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    if (span == 0) return static_cast<int64_t>(next());  // the whole 64-bit range
    const uint64_t limit = UINT64_MAX - UINT64_MAX % span;
    uint64_t x;
    do x = next();
    while (x >= limit);
    return lo + static_cast<int64_t>(x % span);
  }
  /// @brief Standard normal (Box-Muller; the second value is dropped for simplicity).
  double normal() {
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  /// @brief Gamma(shape, scale): Marsaglia and Tsang's method; shape < 1 by boosting.
  double gamma(double shape, double scale) {
    if (shape < 1.0) return gamma(shape + 1.0, scale) * std::pow(1.0 - uniform(), 1.0 / shape);
    const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      double x, v;
      do {
        x = normal();
        v = 1.0 + c * x;
      } while (v <= 0);
      v = v * v * v;
      const double u = 1.0 - uniform();
      if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v * scale;
    }
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace th::bench
