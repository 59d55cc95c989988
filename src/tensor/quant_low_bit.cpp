// q2_K, q3_K, iq4_nl and iq4_xs blocks, following ggml-quants.c's dequantize_row_* and
// reference quantizers operation for operation (see quant_low_bit.h).
#include "tensor/quant_low_bit.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/half.h"
#include "tensor/quant_fit.h"

// As in quant.cpp: no fused multiply-add, or low bits and chosen levels drift from ggml's.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace th {

namespace {

using quant_fit::nearest_int;

// q2_K and q3_K: element 128h + 32j + l keeps its low 2 bits at bit 2j of qs[32h + l].
struct TwoBitsAt {
  int byte;
  int shift;
};
TwoBitsAt q2_location(int e) { return {32 * (e / 128) + e % 32, 2 * ((e % 128) / 32)}; }

int q2_bits(const uint8_t* qs, int e) {
  const TwoBitsAt at = q2_location(e);
  return (qs[at.byte] >> at.shift) & 3;
}

void set_q2_bits(uint8_t* qs, int e, int q) {
  const TwoBitsAt at = q2_location(e);
  qs[at.byte] |= static_cast<uint8_t>(q << at.shift);
}

// q3_K's 6-bit scale of sub-block g (0..63, stored with +32): its low 4 bits in nibble g / 8
// of scales[g % 8], its high 2 bits at bit 2 (g / 4) of scales[8 + g % 4].
int q3_scale(const uint8_t* scales, int g) {
  const int low = g < 8 ? scales[g] & 0xF : scales[g - 8] >> 4;
  return low | (((scales[8 + g % 4] >> (2 * (g / 4))) & 3) << 4);
}

void set_q3_scale(uint8_t* scales, int g, int s) {
  if (g < 8)
    scales[g] = static_cast<uint8_t>(s & 0xF);
  else
    scales[g - 8] |= static_cast<uint8_t>((s & 0xF) << 4);
  scales[8 + g % 4] |= static_cast<uint8_t>((s >> 4) << (2 * (g / 4)));
}

// q4_0's nibble layout, which iq4_nl and each iq4_xs sub-block use: element e of 32 in byte e % 16.
int nibble(const uint8_t* qs, int e) { return (qs[e % 16] >> (e < 16 ? 0 : 4)) & 0xF; }

int iq4_scale(const BlockIQ4_XS& b, int j) {
  return ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((b.scales_h >> (2 * j)) & 3) << 4);
}

// ggml's best_index_int8: the nearest of the 16 ascending levels (the upper one on ties;
// NaN gives the last).
int nearest_level(float x) {
  if (x <= kIq4Values[0]) return 0;
  if (x >= kIq4Values[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < kIq4Values[mid])
      hi = mid;
    else
      lo = mid;
  }
  return x - kIq4Values[hi - 1] < kIq4Values[hi] - x ? hi - 1 : hi;
}

// ggml's quantize_row_iq4_nl_impl fit of one 32-element sub-block without an importance
// matrix (weights x^2) and with 7 trials each side: the scale d of x ~ d * level. L gets the
// levels of the first pass (the callers re-pick them against the scale they store).
float fit_iq4_block(const float* x, uint8_t* L) {
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < 1e-15f) return 0.0f;  // ggml's GROUP_MAX_EPS
  constexpr int kTries = 7;
  float d = -max / kIq4Values[0];
  float id = 1 / d;
  float sumqx = 0, sumq2 = 0;
  for (int j = 0; j < 32; ++j) {
    const int l = nearest_level(id * x[j]);
    L[j] = static_cast<uint8_t>(l);
    const float q = kIq4Values[l];
    const float w = x[j] * x[j];
    sumqx += w * q * x[j];
    sumq2 += w * q * q;
  }
  d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
  float best = d * sumqx;
  for (int t = -kTries; t <= kTries; ++t) {
    id = static_cast<float>(t + kIq4Values[0]) / max;
    sumqx = sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const float q = kIq4Values[nearest_level(id * x[j])];
      const float w = x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
    // sumqx^2 / sumq2 is the error reduction of the best scale for these levels.
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

void pack_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[16 + j] << 4));
}

}  // namespace

// ---------------------------------------------------------------- q2_K

void dequantize_block(const BlockQ2_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float min = f16_to_f32(b.dmin);
  for (int g = 0; g < 16; ++g) {
    const float dl = d * (b.scales[g] & 0xF), ml = min * (b.scales[g] >> 4);
    for (int e = 16 * g; e < 16 * (g + 1); ++e) y[e] = dl * q2_bits(b.qs, e) - ml;
  }
}

void quantize_block(const float* x, BlockQ2_K& b) {
  uint8_t L[kQKK];
  float scales[16], mins[16], weights[16];
  float max_scale = 0, max_min = 0;  // the fit never gives a negative scale or min
  for (int g = 0; g < 16; ++g) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * g + l]);
    scales[g] = quant_fit::fit_scale_min(16, 3, x + 16 * g, weights, L + 16 * g, mins[g], -0.5f, 0.1f, 15, true);
    max_scale = std::max(max_scale, scales[g]);
    max_min = std::max(max_min, mins[g]);
  }
  b = {};
  // Scales and mins become 4-bit multiples of d = max scale / 15 and dmin = max min / 15.
  // ggml does not clamp; for finite input the values are 0..15 already, the clamp keeps a
  // broken block's garbage inside its nibble.
  if (max_scale > 0) {
    const float iscale = 15.f / max_scale;
    for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * scales[g]), 0, 15));
    b.d = f32_to_f16(max_scale / 15.f);
  }
  if (max_min > 0) {
    const float iscale = 15.f / max_min;
    for (int g = 0; g < 16; ++g)
      b.scales[g] |= static_cast<uint8_t>(std::clamp(nearest_int(iscale * mins[g]), 0, 15) << 4);
    b.dmin = f32_to_f16(max_min / 15.f);
  }
  // Re-pick each level against the scale and min as stored.
  for (int g = 0; g < 16; ++g) {
    const float d = f16_to_f32(b.d) * (b.scales[g] & 0xF);
    if (d == 0.0f) continue;
    const float dm = f16_to_f32(b.dmin) * (b.scales[g] >> 4);
    for (int i = 0; i < 16; ++i)
      L[16 * g + i] = static_cast<uint8_t>(std::clamp(nearest_int((x[16 * g + i] + dm) / d), 0, 3));
  }
  for (int e = 0; e < kQKK; ++e) set_q2_bits(b.qs, e, L[e]);
}

// ---------------------------------------------------------------- q3_K

void dequantize_block(const BlockQ3_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int g = 0; g < 16; ++g) {
    const float dl = d * (q3_scale(b.scales, g) - 32);
    for (int e = 16 * g; e < 16 * (g + 1); ++e) {
      const bool high = (b.hmask[e % 32] >> (e / 32)) & 1;
      y[e] = dl * (q2_bits(b.qs, e) - (high ? 0 : 4));
    }
  }
}

void quantize_block(const float* x, BlockQ3_K& b) {
  int8_t L[kQKK];
  float scales[16];
  float max_scale = 0, amax = 0;
  for (int g = 0; g < 16; ++g) {
    scales[g] = quant_fit::fit_scale_q3(16, 4, x + 16 * g, L + 16 * g);
    if (std::fabs(scales[g]) > amax) {
      amax = std::fabs(scales[g]);
      max_scale = scales[g];
    }
  }
  b = {};
  if (max_scale != 0.0f) {
    // The largest sub-block scale becomes -32 * d; the rest land in -32..31 (+32 stored).
    const float iscale = -32.f / max_scale;
    for (int g = 0; g < 16; ++g) set_q3_scale(b.scales, g, std::clamp(nearest_int(iscale * scales[g]), -32, 31) + 32);
    b.d = f32_to_f16(1 / iscale);
  }
  for (int g = 0; g < 16; ++g) {
    const float d = f16_to_f32(b.d) * (q3_scale(b.scales, g) - 32);
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * g + i] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * g + i] / d), -4, 3) + 4);
  }
  for (int e = 0; e < kQKK; ++e) {
    int q = L[e];
    if (q > 3) {
      b.hmask[e % 32] |= static_cast<uint8_t>(1u << (e / 32));
      q -= 4;
    }
    set_q2_bits(b.qs, e, q);
  }
}

// ---------------------------------------------------------------- iq4_nl, iq4_xs

void dequantize_block(const BlockIQ4_NL& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int e = 0; e < kQK; ++e) y[e] = d * kIq4Values[nibble(b.qs, e)];
}

void quantize_block(const float* x, BlockIQ4_NL& b) {
  uint8_t L[kQK];
  const float d = fit_iq4_block(x, L);
  b.d = f32_to_f16(d);
  // Levels re-picked against the fitted scale itself, not its f16 rounding, as ggml does.
  const float id = d != 0.0f ? 1 / d : 0.0f;
  for (int j = 0; j < kQK; ++j) L[j] = static_cast<uint8_t>(nearest_level(id * x[j]));
  pack_nibbles(L, b.qs);
}

void dequantize_block(const BlockIQ4_XS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < 8; ++j) {
    const float dl = d * (iq4_scale(b, j) - 32);
    for (int e = 0; e < 32; ++e) y[32 * j + e] = dl * kIq4Values[nibble(b.qs + 16 * j, e)];
  }
}

void quantize_block(const float* x, BlockIQ4_XS& b) {
  uint8_t L[kQKK];
  float scales[8];
  float max_scale = 0, amax_scale = 0;
  for (int j = 0; j < 8; ++j) {
    scales[j] = fit_iq4_block(x + 32 * j, L + 32 * j);
    if (std::fabs(scales[j]) > amax_scale) {
      amax_scale = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  b = {};
  // The largest sub-block scale becomes -32 * d; levels are re-picked against d * l with d
  // before its f16 rounding, as ggml does (an all-zero block stores d = -0).
  const float d = -max_scale / 32;
  b.d = f32_to_f16(d);
  const float id = d != 0.0f ? 1 / d : 0.0f;
  for (int j = 0; j < 8; ++j) {
    const int l = std::clamp(nearest_int(id * scales[j]), -32, 31);
    const float dl = d * l;
    const float idl = dl != 0.0f ? 1 / dl : 0.0f;
    for (int e = 0; e < 32; ++e) L[32 * j + e] = static_cast<uint8_t>(nearest_level(idl * x[32 * j + e]));
    const int s = l + 32;
    b.scales_l[j / 2] |= static_cast<uint8_t>((s & 0xF) << (4 * (j % 2)));
    b.scales_h |= static_cast<uint16_t>((s >> 4) << (2 * j));
  }
  for (int j = 0; j < 8; ++j) pack_nibbles(L + 32 * j, b.qs + 16 * j);
}

}  // namespace th
