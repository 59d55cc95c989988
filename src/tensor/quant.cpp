// Reference row (de)quantization, one block at a time, in the same float
// operations as ggml's ggml-quants.c so that results match llama.cpp bit for bit
// (the low-bit types' blocks in quant_low_bit.cpp, the fitting searches in quant_fit.cpp):
// dequantize_row_* for decoding, and quantize_row_*_ref (ggml's reference
// quantizers, including make_qkx2_quants / make_qx_quants for the K-quants) for
// encoding. Not ported: ggml's importance-matrix quantizers (quantize_*_impl).
#include "tensor/quant.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tensor/half.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_fit.h"
#include "tensor/quant_low_bit.h"

// Fusing a * b + c into one fma changes low bits and, now and then, a chosen level or
// scale; keep plain IEEE operations on every target (GCC in ISO C++ mode already does).
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace th {
namespace {

using quant_fit::fit_scale_min;
using quant_fit::fit_scale_symmetric;
using quant_fit::nearest_int;

// Wrong arguments are caller bugs: stop loudly, in release builds too, rather than
// read or write past a row.
[[noreturn]] void die(const char* fn, const char* why, DType t, int64_t n) {
  std::fprintf(stderr, "tokenhive: %s: %s (dtype %u, n = %lld)\n", fn, why, static_cast<unsigned>(t),
               static_cast<long long>(n));
  std::abort();
}

void check_args(const char* fn, DType t, int64_t n) {
  const DTypeInfo* info = dtype_info(static_cast<uint32_t>(t));
  if (info == nullptr || !info->can_dequantize) die(fn, "type has no reference (de)quantizer", t, n);
  if (n < 0 || n % info->block_size != 0) die(fn, "n is not a whole number of blocks", t, n);
}

// ggml's `MIN(hi, (int8_t)v)`: truncation toward zero, made defined for every v
// (NaN goes to lo) by clamping before the conversion.
int trunc_clamped(float v, int lo, int hi) {
  v = std::fmin(std::fmax(v, static_cast<float>(lo)), static_cast<float>(hi));
  return static_cast<int>(v);
}

// roundf (half away from zero) as q8_0 uses, clamped for the same reason.
int round_clamped(float v, int lo, int hi) {
  v = std::fmin(std::fmax(v, static_cast<float>(lo)), static_cast<float>(hi));
  return static_cast<int>(std::round(v));
}

uint32_t load_le32(const uint8_t* p) {
  return p[0] | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

void store_le32(uint32_t v, uint8_t* p) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Where element e of a 32-element block keeps its low 4 bits: element e and e + 16 share byte e % 16.
struct NibbleAt {
  int byte;
  int shift;
};
NibbleAt q32_nibble(int e) { return {e % 16, e < 16 ? 0 : 4}; }

// q4_K/q5_K: 64-element chunk c uses qs[32c .. 32c+31]; its first sub-block (even j) takes
// the low nibbles, its second the high ones. q5_K's bit 4 of element e is bit e / 32 of qh[e % 32].
NibbleAt qk_nibble(int e) { return {32 * (e / 64) + e % 32, (e / 32) % 2 == 0 ? 0 : 4}; }

// q6_K: each 128-element half h uses ql[64h ..] and qh[32h ..]. Its four 32-element
// quarters g share them: quarters 0,1 in low nibbles of ql[l], ql[l+32], quarters 2,3 in
// the high nibbles; the 2 high bits of quarter g sit at bits 2g of qh[l].
struct Q6At {
  NibbleAt low;
  NibbleAt high;
};
Q6At q6_k_location(int e) {
  const int h = e / 128, g = (e % 128) / 32, l = e % 32;
  return {{64 * h + 32 * (g % 2) + l, g < 2 ? 0 : 4}, {32 * h + l, 2 * g}};
}

// ggml's get_scale_min_k4. Sub-blocks 0-3 keep a 6-bit scale in byte j and a 6-bit min in
// byte j+4; sub-blocks 4-7 keep low nibbles in byte j+4 and their top 2 bits in the
// otherwise unused bits 6-7 of bytes j-4 (scale) and j (min).
void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// The inverse of scale_min_k4; q must start zeroed.
void set_scale_min_k4(int j, int sc, int m, uint8_t* q) {
  if (j < 4) {
    q[j] |= static_cast<uint8_t>(sc);
    q[j + 4] |= static_cast<uint8_t>(m);
  } else {
    q[j + 4] = static_cast<uint8_t>((sc & 0xF) | ((m & 0xF) << 4));
    q[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
    q[j] |= static_cast<uint8_t>((m >> 4) << 6);
  }
}

// ---------------------------------------------------------------- 32-element blocks

void dequantize_block(const BlockQ8_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int e = 0; e < kQK; ++e) y[e] = b.qs[e] * d;
}

void quantize_block(const float* x, BlockQ8_0& b) {
  float amax = 0.0f;
  for (int e = 0; e < kQK; ++e) amax = std::max(amax, std::fabs(x[e]));
  const float d = amax / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  for (int e = 0; e < kQK; ++e) b.qs[e] = static_cast<int8_t>(round_clamped(x[e] * id, -127, 127));
}

int q32_low4(const uint8_t* qs, int e) {
  const NibbleAt at = q32_nibble(e);
  return (qs[at.byte] >> at.shift) & 0xF;
}

void set_q32_low4(uint8_t* qs, int e, int q) {
  const NibbleAt at = q32_nibble(e);
  qs[at.byte] |= static_cast<uint8_t>((q & 0xF) << at.shift);
}

// The value of largest magnitude, with its sign: q4_0/q5_0 map it to -8/-16 exactly.
float signed_absmax(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int e = 0; e < kQK; ++e) {
    if (amax < std::fabs(x[e])) {
      amax = std::fabs(x[e]);
      max = x[e];
    }
  }
  return max;
}

void min_max(const float* x, float& min, float& max) {
  min = FLT_MAX;
  max = -FLT_MAX;
  for (int e = 0; e < kQK; ++e) {
    if (x[e] < min) min = x[e];
    if (x[e] > max) max = x[e];
  }
}

void dequantize_block(const BlockQ4_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int e = 0; e < kQK; ++e) y[e] = (q32_low4(b.qs, e) - 8) * d;
}

void quantize_block(const float* x, BlockQ4_0& b) {
  const float d = signed_absmax(x) / -8;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b = {};
  b.d = f32_to_f16(d);
  // x * id lies in [-8, 8]; +8.5 then truncation rounds to 0..16, and 16 (only the far end of
  // the side opposite to the max) is clipped to 15.
  for (int e = 0; e < kQK; ++e) set_q32_low4(b.qs, e, trunc_clamped(x[e] * id + 8.5f, 0, 15));
}

void dequantize_block(const BlockQ4_1& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float m = f16_to_f32(b.m);
  for (int e = 0; e < kQK; ++e) y[e] = q32_low4(b.qs, e) * d + m;
}

void quantize_block(const float* x, BlockQ4_1& b) {
  float min, max;
  min_max(x, min, max);
  const float d = (max - min) / 15;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b = {};
  b.d = f32_to_f16(d);
  b.m = f32_to_f16(min);
  for (int e = 0; e < kQK; ++e) set_q32_low4(b.qs, e, trunc_clamped((x[e] - min) * id + 0.5f, 0, 15));
}

int q5_value(const uint8_t* qs, const uint8_t* qh, int e) {
  return q32_low4(qs, e) | static_cast<int>(((load_le32(qh) >> e) & 1u) << 4);
}

void set_q5_value(uint8_t* qs, uint8_t* qh, int e, int q) {
  set_q32_low4(qs, e, q);
  store_le32(load_le32(qh) | (static_cast<uint32_t>(q >> 4) << e), qh);
}

void dequantize_block(const BlockQ5_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int e = 0; e < kQK; ++e) y[e] = (q5_value(b.qs, b.qh, e) - 16) * d;
}

void quantize_block(const float* x, BlockQ5_0& b) {
  const float d = signed_absmax(x) / -16;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b = {};
  b.d = f32_to_f16(d);
  for (int e = 0; e < kQK; ++e) set_q5_value(b.qs, b.qh, e, trunc_clamped(x[e] * id + 16.5f, 0, 31));
}

void dequantize_block(const BlockQ5_1& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float m = f16_to_f32(b.m);
  for (int e = 0; e < kQK; ++e) y[e] = q5_value(b.qs, b.qh, e) * d + m;
}

void quantize_block(const float* x, BlockQ5_1& b) {
  float min, max;
  min_max(x, min, max);
  const float d = (max - min) / 31;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b = {};
  b.d = f32_to_f16(d);
  b.m = f32_to_f16(min);
  for (int e = 0; e < kQK; ++e) set_q5_value(b.qs, b.qh, e, trunc_clamped((x[e] - min) * id + 0.5f, 0, 31));
}

// ---------------------------------------------------------------- q4_K, q5_K

// Fits each 32-element sub-block, then stores the scales and mins as 6-bit multiples of
// d = max scale / 63 and dmin = max min / 63, and re-picks every level against the scales
// as stored. L gets 0..nmax per element. Shared by q4_K (nmax 15) and q5_K (nmax 31).
template <class Block>
void quantize_k_scales(const float* x, Block& b, int nmax, float rmin, float rdelta, int nstep, uint8_t* L) {
  float scales[8], mins[8], weights[32];
  float max_scale = 0, max_min = 0;  // scales and mins are never negative
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = fit_scale_min(32, nmax, xs, weights, L + 32 * j, mins[j], rmin, rdelta, nstep, false);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; ++j) {
    // ggml clamps only at 63; the fit never yields a negative scale or min, so 0 is a no-op.
    const int ls = std::clamp(nearest_int(inv_scale * scales[j]), 0, 63);
    const int lm = std::clamp(nearest_int(inv_min * mins[j]), 0, 63);
    set_scale_min_k4(j, ls, lm, b.scales);
  }
  b.d = f32_to_f16(max_scale / 63.f);
  b.dmin = f32_to_f16(max_min / 63.f);

  for (int j = 0; j < 8; ++j) {
    int sc, m;
    scale_min_k4(j, b.scales, sc, m);
    const float d = f16_to_f32(b.d) * sc;
    if (d == 0.0f) continue;  // the sub-block dequantizes to -dm whatever its levels
    const float dm = f16_to_f32(b.dmin) * m;
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + i] + dm) / d), 0, nmax));
  }
}

void dequantize_block(const BlockQ4_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float min = f16_to_f32(b.dmin);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    scale_min_k4(j, b.scales, sc, m);
    const float dj = d * sc, mj = min * m;
    for (int e = 32 * j; e < 32 * (j + 1); ++e) {
      const NibbleAt at = qk_nibble(e);
      y[e] = dj * ((b.qs[at.byte] >> at.shift) & 0xF) - mj;
    }
  }
}

void quantize_block(const float* x, BlockQ4_K& b) {
  uint8_t L[kQKK];
  b = {};
  quantize_k_scales(x, b, 15, -1.0f, 0.1f, 20, L);
  for (int e = 0; e < kQKK; ++e) {
    const NibbleAt at = qk_nibble(e);
    b.qs[at.byte] |= static_cast<uint8_t>(L[e] << at.shift);
  }
}

void dequantize_block(const BlockQ5_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float min = f16_to_f32(b.dmin);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    scale_min_k4(j, b.scales, sc, m);
    const float dj = d * sc, mj = min * m;
    for (int e = 32 * j; e < 32 * (j + 1); ++e) {
      const NibbleAt at = qk_nibble(e);
      const int q = ((b.qs[at.byte] >> at.shift) & 0xF) | (((b.qh[e % 32] >> j) & 1) << 4);
      y[e] = dj * q - mj;
    }
  }
}

void quantize_block(const float* x, BlockQ5_K& b) {
  uint8_t L[kQKK];
  b = {};
  quantize_k_scales(x, b, 31, -0.5f, 0.1f, 15, L);
  for (int e = 0; e < kQKK; ++e) {
    const NibbleAt at = qk_nibble(e);
    b.qs[at.byte] |= static_cast<uint8_t>((L[e] & 0xF) << at.shift);
    b.qh[e % 32] |= static_cast<uint8_t>((L[e] >> 4) << (e / 32));
  }
}

// ---------------------------------------------------------------- q6_K

void dequantize_block(const BlockQ6_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int e = 0; e < kQKK; ++e) {
    const Q6At at = q6_k_location(e);
    const int q = ((b.ql[at.low.byte] >> at.low.shift) & 0xF) | (((b.qh[at.high.byte] >> at.high.shift) & 3) << 4);
    y[e] = d * b.scales[e / 16] * (q - 32);
  }
}

void quantize_block(const float* x, BlockQ6_K& b) {
  int8_t L[kQKK];
  float scales[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int ib = 0; ib < 16; ++ib) {
    scales[ib] = fit_scale_symmetric(16, 32, x + 16 * ib, L + 16 * ib);
    if (std::fabs(scales[ib]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[ib]);
      max_scale = scales[ib];
    }
  }
  b = {};
  if (max_abs_scale < 1e-15f) return;  // all (near) zero: d = 0

  // The largest sub-block scale becomes -128 * d; |scale| <= its magnitude keeps the rest in -128..128.
  const float iscale = -128.f / max_scale;
  b.d = f32_to_f16(1 / iscale);
  for (int ib = 0; ib < 16; ++ib)
    b.scales[ib] = static_cast<int8_t>(std::clamp(nearest_int(iscale * scales[ib]), -128, 127));

  for (int j = 0; j < 16; ++j) {
    const float d = f16_to_f32(b.d) * b.scales[j];
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + i] / d), -32, 31) + 32);
  }
  for (int e = 0; e < kQKK; ++e) {
    const Q6At at = q6_k_location(e);
    b.ql[at.low.byte] |= static_cast<uint8_t>((L[e] & 0xF) << at.low.shift);
    b.qh[at.high.byte] |= static_cast<uint8_t>((L[e] >> 4) << at.high.shift);
  }
}

// ---------------------------------------------------------------- rows

// Blocks are copied in and out because a row inside a file need not be aligned for them.
template <class Block>
void dequantize_blocks(const void* src, float* dst, int64_t n) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n / Block::kElements; ++i) {
    Block b;
    std::memcpy(&b, bytes + i * sizeof(Block), sizeof(Block));
    dequantize_block(b, dst + i * Block::kElements);
  }
}

template <class Block>
void quantize_blocks(const float* src, void* dst, int64_t n) {
  auto* bytes = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n / Block::kElements; ++i) {
    Block b;
    quantize_block(src + i * Block::kElements, b);
    std::memcpy(bytes + i * sizeof(Block), &b, sizeof(Block));
  }
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

void store_u16(uint16_t v, uint8_t* p) { std::memcpy(p, &v, 2); }

}  // namespace

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  check_args("dequantize_row", t, n);
  if (n == 0) return;
  const auto* bytes = static_cast<const uint8_t*>(src);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load_u16(bytes + 2 * i));
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load_u16(bytes + 2 * i));
      return;
    case DType::Q8_0:
      return dequantize_blocks<BlockQ8_0>(src, dst, n);
    case DType::Q4_0:
      return dequantize_blocks<BlockQ4_0>(src, dst, n);
    case DType::Q4_1:
      return dequantize_blocks<BlockQ4_1>(src, dst, n);
    case DType::Q5_0:
      return dequantize_blocks<BlockQ5_0>(src, dst, n);
    case DType::Q5_1:
      return dequantize_blocks<BlockQ5_1>(src, dst, n);
    case DType::Q4_K:
      return dequantize_blocks<BlockQ4_K>(src, dst, n);
    case DType::Q5_K:
      return dequantize_blocks<BlockQ5_K>(src, dst, n);
    case DType::Q6_K:
      return dequantize_blocks<BlockQ6_K>(src, dst, n);
    case DType::Q2_K:
      return dequantize_blocks<BlockQ2_K>(src, dst, n);
    case DType::Q3_K:
      return dequantize_blocks<BlockQ3_K>(src, dst, n);
    case DType::IQ4_NL:
      return dequantize_blocks<BlockIQ4_NL>(src, dst, n);
    case DType::IQ4_XS:
      return dequantize_blocks<BlockIQ4_XS>(src, dst, n);
    default:
      break;
  }
  die("dequantize_row", "dtype table says dequantizable but there is no code for it", t, n);
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  check_args("quantize_row", t, n);
  if (n == 0) return;
  auto* bytes = static_cast<uint8_t*>(dst);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) store_u16(f32_to_f16(src[i]), bytes + 2 * i);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) store_u16(f32_to_bf16(src[i]), bytes + 2 * i);
      return;
    case DType::Q8_0:
      return quantize_blocks<BlockQ8_0>(src, dst, n);
    case DType::Q4_0:
      return quantize_blocks<BlockQ4_0>(src, dst, n);
    case DType::Q4_1:
      return quantize_blocks<BlockQ4_1>(src, dst, n);
    case DType::Q5_0:
      return quantize_blocks<BlockQ5_0>(src, dst, n);
    case DType::Q5_1:
      return quantize_blocks<BlockQ5_1>(src, dst, n);
    case DType::Q4_K:
      return quantize_blocks<BlockQ4_K>(src, dst, n);
    case DType::Q5_K:
      return quantize_blocks<BlockQ5_K>(src, dst, n);
    case DType::Q6_K:
      return quantize_blocks<BlockQ6_K>(src, dst, n);
    case DType::Q2_K:
      return quantize_blocks<BlockQ2_K>(src, dst, n);
    case DType::Q3_K:
      return quantize_blocks<BlockQ3_K>(src, dst, n);
    case DType::IQ4_NL:
      return quantize_blocks<BlockIQ4_NL>(src, dst, n);
    case DType::IQ4_XS:
      return quantize_blocks<BlockIQ4_XS>(src, dst, n);
    default:
      break;
  }
  die("quantize_row", "dtype table says quantizable but there is no code for it", t, n);
}

}  // namespace th
