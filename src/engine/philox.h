// Philox4x32-10, the counter-based generator of Salmon, Moraes, Dror and Shaw,
// "Parallel random numbers: as easy as 1, 2, 3" (SC'11), as in Random123.
// A counter-based generator has no state to carry between calls: the output is
// a pure function of (counter, key), which is what lets a request's draws be
// recomputed anywhere from its seed and the token position alone.
#pragma once

#include <array>
#include <cstdint>

namespace th {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

namespace philox_detail {

// Constants from the paper (Random123's PHILOX_M4x32_* and PHILOX_W32_*).
inline constexpr uint32_t kM0 = 0xD2511F53u;
inline constexpr uint32_t kM1 = 0xCD9E8D57u;
inline constexpr uint32_t kW0 = 0x9E3779B9u;  // golden ratio
inline constexpr uint32_t kW1 = 0xBB67AE85u;  // sqrt(3) - 1

constexpr PhiloxCounter round(const PhiloxCounter& c, const PhiloxKey& k) {
  const uint64_t p0 = uint64_t{kM0} * c[0];
  const uint64_t p1 = uint64_t{kM1} * c[2];
  return {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
          static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
}

}  // namespace philox_detail

/// @brief Philox4x32 with 10 rounds: the Random123 `philox4x32(ctr, key)` with R = 10.
constexpr PhiloxCounter philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {  // the key is bumped between rounds, not before the first
      key[0] += philox_detail::kW0;
      key[1] += philox_detail::kW1;
    }
    ctr = philox_detail::round(ctr, key);
  }
  return ctr;
}

}  // namespace th
