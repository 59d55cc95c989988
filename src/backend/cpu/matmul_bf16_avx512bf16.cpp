// BF16 weights x BF16 activations with AVX512-BF16's vdpbf16ps (Cooper Lake, Sapphire
// Rapids, Zen 4): 32 weight-activation pairs per instruction, products exact in f32 (8 x
// 8 significand bits), summed into 16 f32 lanes. The activations are rounded to bf16 once
// per matmul (convert_act: round to nearest even, as f32_to_bf16, subnormals and NaN
// included), which adds at most 2^-8 sum |w x| to a product against f32 activations; that
// is bf16 arithmetic, what the bf16 compute type asks for, and halves the activation bytes
// the tiles stream. vdpbf16ps treats bf16 subnormals (below 2^-126) as zero. Registered
// for AVX-512 BF16 weights only on CPUs with the feature (matmul_kernels.cpp); elsewhere
// the f32-activation kernels of matmul_float*.cpp run.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/act_q8.h"
#include "backend/cpu/tile_table.h"

namespace th::cpu {

namespace {

constexpr int kPairs = 32;  // bf16 values per zmm

// x (n f32) -> n bf16 at dst, as f32_to_bf16: NaN -> its top half with the quiet bit set,
// else round to nearest even by adding 0x7fff + the kept part's lowest bit.
void convert_act_bf16_avx512(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  auto one = [](__m512i v) {
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(v, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(v, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(v, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(v, 16), _mm512_set1_epi32(64));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
  };
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), one(_mm512_loadu_si512(x + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm256_mask_storeu_epi16(out + i, m, one(_mm512_maskz_loadu_epi32(m, x + i)));
  }
}

using TileFn = void (*)(const uint8_t*, size_t, const uint8_t*, size_t, int64_t, float*, int64_t);

struct Bf16Tiles {
  // y[t * y_stride + r] = dot(W row r, x row t) for r < R, t < T.
  template <int R, int T>
  static void tile(const uint8_t* w, size_t w_row_bytes, const uint8_t* x, size_t x_row_bytes, int64_t cols,
                   float* y, int64_t y_stride) {
    __m512 acc[R][T];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    auto at = [](const uint8_t* row, int64_t c) { return reinterpret_cast<const uint16_t*>(row) + c; };
    const int64_t body = cols - cols % kPairs;
    for (int64_t c = 0; c < body; c += kPairs) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512bh wv = (__m512bh)_mm512_loadu_si512(at(w + r * w_row_bytes, c));
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t)
          acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, (__m512bh)_mm512_loadu_si512(at(x + t * x_row_bytes, c)));
      }
    }
    if (body < cols) {  // the last columns through zero-filling masked loads
      const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (cols - body)) - 1);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(m, at(w + r * w_row_bytes, body));
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t)
          acc[r][t] =
              _mm512_dpbf16_ps(acc[r][t], wv, (__m512bh)_mm512_maskz_loadu_epi16(m, at(x + t * x_row_bytes, body)));
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) y[t * y_stride + r] = _mm512_reduce_add_ps(acc[r][t]);
  }
};

// 4 x 4 tiles (16 accumulators); 4 rows at a time for one token, as the float family.
void gemm_bf16_dot(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                   size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  constexpr int kR = 4, kT = 4;
  static constexpr TileTable<TileFn, kR, kT, Bf16Tiles> table;
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

extern constinit const MatmulKernel kMatmulBF16Avx512Dot = {DType::BF16, DType::BF16, Isa::Avx512,
                                                            convert_act_bf16_avx512, gemm_bf16_dot};

}  // namespace th::cpu
