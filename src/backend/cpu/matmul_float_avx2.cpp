// F32, F16 and BF16 weights x f32 activations, AVX2 + FMA + F16C.
//
// A weight vector of 8 lanes is widened to f32 once (vcvtph2ps for f16; for
// bf16 a zero-extend and a 16-bit shift, as bf16 is the top half of an f32)
// and multiplied into T tokens' accumulators, the activations coming straight
// from memory as the FMA's operand. A tile of kR x kT = 4 x 3 keeps 12
// accumulators: FMA latency 4 x 2 per cycle needs at least 8 in flight.
// Columns past the last multiple of 8 go through a zero-padded copy.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/act_q8.h"

namespace th::cpu {

namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

struct F32Weights {
  using Elem = float;
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
};
struct F16Weights {
  using Elem = uint16_t;
  static __m256 load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
};
struct BF16Weights {
  using Elem = uint16_t;
  static __m256 load(const uint16_t* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
};

template <class W, int R, int T>
void tile(const uint8_t* w, size_t w_row_bytes, const uint8_t* x, size_t x_row_bytes, int64_t cols, float* y,
          int64_t y_stride) {
  using E = typename W::Elem;
  __m256 acc[R][T];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
  #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  const int64_t body = cols & ~int64_t{7};
  for (int64_t c = 0; c < body; c += 8) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 wv = W::load(reinterpret_cast<const E*>(w + r * w_row_bytes) + c);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t)
        acc[r][t] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(reinterpret_cast<const float*>(x + t * x_row_bytes) + c),
                                    acc[r][t]);
    }
  }
  if (body < cols) {
    const int n = static_cast<int>(cols - body);
    alignas(32) E wpad[8];
    alignas(32) float xpad[8];
    for (int r = 0; r < R; ++r) {
      std::memset(wpad, 0, sizeof wpad);
      std::memcpy(wpad, reinterpret_cast<const E*>(w + r * w_row_bytes) + body, n * sizeof(E));
      const __m256 wv = W::load(wpad);
      for (int t = 0; t < T; ++t) {
        std::memset(xpad, 0, sizeof xpad);
        std::memcpy(xpad, reinterpret_cast<const float*>(x + t * x_row_bytes) + body, n * sizeof(float));
        acc[r][t] = _mm256_fmadd_ps(wv, _mm256_load_ps(xpad), acc[r][t]);
      }
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
  #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) y[t * y_stride + r] = hsum(acc[r][t]);
}

using TileFn = void (*)(const uint8_t*, size_t, const uint8_t*, size_t, int64_t, float*, int64_t);

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

// kR x kT tiles for several tokens; kR1 rows at a time for one token (streaming).
template <class W, int kR, int kT, int kR1>
void gemm_float_avx2(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                     size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  if (n_tokens == 1) {
    static constexpr TileTable<W, kR1, 1> table;
    for (int64_t r = r0; r < r1; r += kR1) {
      const int nr = static_cast<int>(min64(kR1, r1 - r));
      table.fn[nr - 1][0](w + r * w_row_bytes, w_row_bytes, act, act_row_bytes, cols, y + r, y_stride);
    }
    return;
  }
  static constexpr TileTable<W, kR, kT> table;
  for (int64_t r = r0; r < r1; r += kR) {
    const int nr = static_cast<int>(min64(kR, r1 - r));
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kT) {
      const int nt = static_cast<int>(min64(kT, n_tokens - t0));
      table.fn[nr - 1][nt - 1](w + r * w_row_bytes, w_row_bytes, act + t0 * act_row_bytes, act_row_bytes, cols,
                               y + t0 * y_stride + r, y_stride);
    }
  }
}

}  // namespace

extern constinit const MatmulKernel kMatmulF32Avx2 = {DType::F32, DType::F32, Isa::Avx2, convert_act_f32,
                                                      gemm_float_avx2<F32Weights, 4, 3, 4>};
extern constinit const MatmulKernel kMatmulF16Avx2 = {DType::F16, DType::F32, Isa::Avx2, convert_act_f32,
                                                      gemm_float_avx2<F16Weights, 4, 3, 4>};
extern constinit const MatmulKernel kMatmulBF16Avx2 = {DType::BF16, DType::F32, Isa::Avx2, convert_act_f32,
                                                       gemm_float_avx2<BF16Weights, 4, 3, 4>};

}  // namespace th::cpu
