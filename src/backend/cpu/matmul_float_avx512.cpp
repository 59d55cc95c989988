// F32, F16 and BF16 weights x f32 activations, AVX-512: the AVX2 structure
// (matmul_float_avx2.cpp) with 16 lanes, a 4 x 4 tile (16 of the 32 zmm
// registers as accumulators) and masked loads for the last columns instead
// of a padded copy.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wall reports as
// uninitialized (GCC bug 105593, fixed in 12.3).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "backend/cpu/act_q8.h"

namespace th::cpu {

namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

struct F32Weights {
  using Elem = float;
  static __m512 load(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct F16Weights {
  using Elem = uint16_t;
  static __m512 load(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct BF16Weights {
  using Elem = uint16_t;
  static __m512 load(const uint16_t* p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
  }
};

template <class W, int R, int T>
void tile(const uint8_t* w, size_t w_row_bytes, const uint8_t* x, size_t x_row_bytes, int64_t cols, float* y,
          int64_t y_stride) {
  using E = typename W::Elem;
  __m512 acc[R][T];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
  #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t c = 0; c < cols; c += 16) {
    const __mmask16 m = cols - c >= 16 ? __mmask16(0xffff) : __mmask16((1u << (cols - c)) - 1);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 wv = W::load(reinterpret_cast<const E*>(w + r * w_row_bytes) + c, m);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t)
        acc[r][t] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(x + t * x_row_bytes) + c),
                                    acc[r][t]);
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
  #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) y[t * y_stride + r] = _mm512_reduce_add_ps(acc[r][t]);
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

template <class W, int kR, int kT, int kR1>
void gemm_float_avx512(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
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

extern constinit const MatmulKernel kMatmulF32Avx512 = {DType::F32, DType::F32, Isa::Avx512, convert_act_f32,
                                                        gemm_float_avx512<F32Weights, 4, 4, 4>};
extern constinit const MatmulKernel kMatmulF16Avx512 = {DType::F16, DType::F32, Isa::Avx512, convert_act_f32,
                                                        gemm_float_avx512<F16Weights, 4, 4, 4>};
extern constinit const MatmulKernel kMatmulBF16Avx512 = {DType::BF16, DType::F32, Isa::Avx512, convert_act_f32,
                                                         gemm_float_avx512<BF16Weights, 4, 4, 4>};

}  // namespace th::cpu
