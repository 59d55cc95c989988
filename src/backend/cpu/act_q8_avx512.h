// The AVX-512 (VNNI) driver shared by the weight families whose activations
// are Q8_0 blocks; the structure of act_q8_avx2.h with two changes. Include it
// from *_avx512.cpp files only (everything is in an unnamed namespace).
//
// 1. vpdpbusd (u8 x s8, four products summed into int32) replaces vpmaddubsw +
//    vpmaddwd, with no int16 saturation. It runs on 256-bit registers
//    (AVX512VL): a block is 32 bytes, and on Intel cores a zmm vpdpbusd has the
//    same MACs per cycle as two ymm ones (one port vs two).
// 2. Weights always enter as unsigned bytes, q + K (q4_0: nibbles, K = 8; q8_0:
//    w ^ 0x80 = w + 128, K = 128), and the K * sum x term enters the dot product
//    for free: vpdpbusd accumulates onto a register that starts at -K/8 * sum x
//    in each of the 8 lanes (broadcast from memory), so the int32 result is the
//    exact sum (q) x for any weights.
//
// 32 vector registers allow a 4 x 4 tile (16 accumulators).
#pragma once

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wall reports as
// uninitialized (GCC bug 105593, fixed in 12.3).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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

// d_x of every activation block as f32, and -K/8 * sum x as int32 (the starting value of
// each of the 8 lanes of a block's dot product).
struct ActSide {
  const float* dx = nullptr;
  const int32_t* lane_init = nullptr;
};

template <int kOffset>
ActSide prepare_act(const uint8_t* act, size_t act_row_bytes, int64_t n_tokens, int64_t nb, const float* f16) {
  static_assert(kOffset % 8 == 0, "the offset is spread over 8 lanes");
  const size_t n = static_cast<size_t>(n_tokens * nb);
  float* dx = thread_scratch(0, n);
  int32_t* init = reinterpret_cast<int32_t*>(thread_scratch(1, n));
  const __m256i ones8 = _mm256_set1_epi8(1);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const uint8_t* xr = act + t * act_row_bytes;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = xr + b * kActBytes;
      dx[t * nb + b] = f16[load_u16(blk)];
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
      const __m256i s32 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones8, x);
      __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
      const int32_t sum = _mm_cvtsi128_si32(s);
      init[t * nb + b] = -(kOffset / 8) * sum;
    }
  }
  return {dx, init};
}

template <class W, int R, int T>
void tile(const uint8_t* w, size_t w_row_bytes, const uint8_t* x, size_t x_row_bytes, int64_t nb, const float* dx,
          const int32_t* lane_init, const float* f16, float* y, int64_t y_stride) {
  __m256 acc[R][T];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
  #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w + r * w_row_bytes + b * W::kBytes;
      const __m256i uw = W::load(blk);
      const __m256 dw = _mm256_broadcast_ss(f16 + load_u16(blk));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i xq =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + t * x_row_bytes + b * kActBytes + 2));
        const __m256i i32 = _mm256_dpbusd_epi32(_mm256_set1_epi32(lane_init[t * nb + b]), uw, xq);
        const __m256 s = _mm256_mul_ps(dw, _mm256_broadcast_ss(dx + t * nb + b));
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i32), s, acc[r][t]);
      }
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
  #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) y[t * y_stride + r] = hsum(acc[r][t]);
}

using TileFn = void (*)(const uint8_t*, size_t, const uint8_t*, size_t, int64_t, const float*, const int32_t*,
                        const float*, float*, int64_t);

template <class W, int kR, int kT>
struct TileTable {
  TileFn fn[kR][kT];
  constexpr TileTable() : fn() { fill<0>(); }
  template <int I>
  constexpr void fill() {
    if constexpr (I < kR * kT) {
      fn[I / kT][I % kT] = tile<W, I / kT + 1, I % kT + 1>;
      fill<I + 1>();
    }
  }
};

template <class W, int kR, int kT, int kR1>
void gemm_q8act(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  if (r1 <= r0 || n_tokens <= 0) return;
  const int64_t nb = cols / kQK;
  const float* f16 = f16_table();
  const ActSide a = prepare_act<W::kOffset>(act, act_row_bytes, n_tokens, nb, f16);
  if (n_tokens == 1) {
    static constexpr TileTable<W, kR1, 1> table;
    for (int64_t r = r0; r < r1; r += kR1) {
      const int nr = static_cast<int>(min64(kR1, r1 - r));
      table.fn[nr - 1][0](w + r * w_row_bytes, w_row_bytes, act, act_row_bytes, nb, a.dx, a.lane_init, f16, y + r,
                          y_stride);
    }
    return;
  }
  static constexpr TileTable<W, kR, kT> table;
  for (int64_t r = r0; r < r1; r += kR) {
    const int nr = static_cast<int>(min64(kR, r1 - r));
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kT) {
      const int nt = static_cast<int>(min64(kT, n_tokens - t0));
      table.fn[nr - 1][nt - 1](w + r * w_row_bytes, w_row_bytes, act + t0 * act_row_bytes, act_row_bytes, nb,
                               a.dx + t0 * nb, a.lane_init + t0 * nb, f16, y + t0 * y_stride + r, y_stride);
    }
  }
}

}  // namespace
}  // namespace th::cpu
