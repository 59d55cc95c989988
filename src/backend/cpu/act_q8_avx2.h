// The AVX2 driver shared by the weight families whose activations are Q8_0
// blocks (matmul_q8_0_avx2.cpp, matmul_q4_0_avx2.cpp). Include it from
// *_avx2.cpp files only: everything is in an unnamed namespace, so no AVX2
// code can stand in for a baseline function of the same name at link time.
//
// A family supplies a weight-block trait W:
//   kBytes                 block size in bytes (fp16 d first, then the quants)
//   load(blk)              the block's 32 quants as bytes, in element order
//   ubytes(w)              the unsigned operand of vpmaddubsw
//   sbytes(x, w)           the signed operand, from activation bytes x
//   kOffset                K when ubytes holds q + K for the true quant q, else 0
//
// Per (row, token, block) the kernel does vpmaddubsw + vpmaddwd (int32, exact),
// vcvtdq2ps, and one multiply-add by d_w * d_x: four or five vector ops. The
// tile is R rows x T tokens of 8-lane f32 accumulators; a weight block is loaded
// (and, for q4_0, unpacked) once per tile and reused by T tokens, an activation
// block by R rows.
//
// Offset weights (q4_0's unsigned nibbles q + 8): sum (q + K - K) x = sum ubytes * x
// - K * sum x. The K * sum x term belongs to the activation block alone, so it is
// computed once per call and applied per row as a small f32 product over blocks,
// sum_b d_w[b] * (-K d_x[b] sum x[b]): 1/8 of a vector op per (row, token, block),
// where ggml spends two vpsignb per block on it.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/act_q8.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {
namespace {

constexpr int kActBytes = sizeof(BlockQ8_0);

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  __builtin_memcpy(&v, p, 2);
  return v;
}

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// The activation side, once per gemm call: d_x of every block as f32 and, for offset
// weights, -sum x as int32 (added to each of the 8 lanes: -8 sum x in all) and
// -K d_x sum x as f32.
struct ActSide {
  const float* dx = nullptr;
  const int32_t* neg_sum = nullptr;
  const float* corr = nullptr;
};

template <int kOffset>
ActSide prepare_act(const uint8_t* act, size_t act_row_bytes, int64_t n_tokens, int64_t nb, const float* f16) {
  const size_t n = static_cast<size_t>(n_tokens * nb);
  float* dx = thread_scratch(0, n);
  int32_t* neg_sum = kOffset ? reinterpret_cast<int32_t*>(thread_scratch(1, n)) : nullptr;
  float* corr = kOffset ? thread_scratch(2, n) : nullptr;
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const uint8_t* xr = act + t * act_row_bytes;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = xr + b * kActBytes;
      const float d = f16[load_u16(blk)];
      dx[t * nb + b] = d;
      if constexpr (kOffset != 0) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
        const __m256i s32 = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, x), ones16);
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
        const int32_t sum = _mm_cvtsi128_si32(s);
        neg_sum[t * nb + b] = -sum;
        corr[t * nb + b] = -static_cast<float>(kOffset) * d * static_cast<float>(sum);
      }
    }
  }
  return {dx, neg_sum, corr};
}

// sum_b a[b] * c[b], eight blocks per multiply-add.
inline float dot_f32(const float* a, const float* c, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(c + i), acc);
  float s = hsum(acc);
  for (; i < n; ++i) s += a[i] * c[i];
  return s;
}

// One R x T tile over every block of the rows. kRowScales: d_w comes from dwf
// (converted once per row group, reused by every token tile) rather than from the
// table per block; the offset correction is then left to the caller (dot_f32).
// Without it (one token), the correction goes into the int32 lanes.
template <class W, int R, int T, bool kRowScales>
void tile(const uint8_t* w, size_t w_row_bytes, const uint8_t* x, size_t x_row_bytes, int64_t nb, const float* dx,
          const int32_t* neg_sum, const float* dwf, const float* f16, float* y, int64_t y_stride) {
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w + r * w_row_bytes + b * W::kBytes;
      const __m256i wq = W::load(blk);
      const __m256i uw = W::ubytes(wq);
      const __m256 dw = kRowScales ? _mm256_broadcast_ss(dwf + r * nb + b) : _mm256_broadcast_ss(f16 + load_u16(blk));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i xq =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + t * x_row_bytes + b * kActBytes + 2));
        __m256i i32 = _mm256_madd_epi16(_mm256_maddubs_epi16(uw, W::sbytes(xq, wq)), ones);
        if constexpr (W::kOffset != 0 && !kRowScales) i32 = _mm256_add_epi32(i32, _mm256_set1_epi32(neg_sum[t * nb + b]));
        const __m256 s = _mm256_mul_ps(dw, _mm256_broadcast_ss(dx + t * nb + b));
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i32), s, acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) y[t * y_stride + r] = hsum(acc[r][t]);
}

using TileFn = void (*)(const uint8_t*, size_t, const uint8_t*, size_t, int64_t, const float*, const int32_t*,
                        const float*, const float*, float*, int64_t);

// Tiles of every size up to kR x kT, for the edges: table[r - 1][t - 1].
template <class W, int kR, int kT, bool kRowScales>
struct TileTable {
  TileFn fn[kR][kT];
  constexpr TileTable() : fn() { fill<0>(); }
  template <int I>
  constexpr void fill() {
    if constexpr (I < kR * kT) {
      fn[I / kT][I % kT] = tile<W, I / kT + 1, I % kT + 1, kRowScales>;
      fill<I + 1>();
    }
  }
};

// The whole gemm for a weight family. kR x kT is the tile for several tokens (kR * kT
// accumulators plus the weight, scale and constant registers fit in 16 ymm); kR1 rows at
// a time for one token, where the kernel streams weights and the only reuse is of the
// activation block across rows.
template <class W, int kR, int kT, int kR1>
void gemm_q8act(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  if (r1 <= r0 || n_tokens <= 0) return;
  const int64_t nb = cols / kQK;
  const float* f16 = f16_table();
  const ActSide a = prepare_act<W::kOffset>(act, act_row_bytes, n_tokens, nb, f16);
  if (n_tokens == 1) {
    static constexpr TileTable<W, kR1, 1, false> table;
    for (int64_t r = r0; r < r1; r += kR1) {
      const int nr = static_cast<int>(min64(kR1, r1 - r));
      table.fn[nr - 1][0](w + r * w_row_bytes, w_row_bytes, act, act_row_bytes, nb, a.dx, a.neg_sum, nullptr, f16,
                          y + r, y_stride);
    }
    return;
  }
  static constexpr TileTable<W, kR, kT, true> table;
  float* dwf = thread_scratch(3, static_cast<size_t>(kR * nb));
  for (int64_t r = r0; r < r1; r += kR) {
    const int nr = static_cast<int>(min64(kR, r1 - r));
    const uint8_t* wr = w + r * w_row_bytes;
    for (int i = 0; i < nr; ++i)
      for (int64_t b = 0; b < nb; ++b) dwf[i * nb + b] = f16[load_u16(wr + i * w_row_bytes + b * W::kBytes)];
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kT) {
      const int nt = static_cast<int>(min64(kT, n_tokens - t0));
      table.fn[nr - 1][nt - 1](wr, w_row_bytes, act + t0 * act_row_bytes, act_row_bytes, nb, a.dx + t0 * nb,
                               nullptr, dwf, f16, y + t0 * y_stride + r, y_stride);
    }
    if constexpr (W::kOffset != 0) {
      for (int i = 0; i < nr; ++i)
        for (int64_t t = 0; t < n_tokens; ++t) y[t * y_stride + r + i] += dot_f32(dwf + i * nb, a.corr + t * nb, nb);
    }
  }
}

}  // namespace
}  // namespace th::cpu
