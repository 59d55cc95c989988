// The panel multiply cores with AVX-512 BW + VNNI (compiled with -mavx512*; called only
// where available_isas() has Avx512); the loops are act_q8k_driver.h's. A 2-row x 4-token
// tile on 64-element vectors: vpmaddubsw then vpdpwssd (multiply by the int16 scales and
// add to the accumulator in one instruction), 2 instructions per 64 multiply-adds per
// (row, token) against AVX2's 3 per 32. With 32 vector registers all eight int32
// accumulators stay in registers through a block; GCC keeps the float sums on the stack,
// one load and store per block.
// GCC 12's AVX-512 headers build some results from _mm512_undefined_*() and then warn
// that it is uninitialized once inlined (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "backend/cpu/act_q8k_driver.h"

namespace th::cpu {

namespace {

struct Avx512 {
  using IVec = __m512i;
  using FVec = __m512;
  using K4Scales = __m512i;  // the block's eight (sc, sc) dwords in the low 256 bits
  static constexpr int kChunk = 64;
  static constexpr int kTileRows = 2;
  static IVec izero() { return _mm512_setzero_si512(); }
  static FVec fzero() { return _mm512_setzero_ps(); }
  static FVec set1(float f) { return _mm512_set1_ps(f); }
  static FVec load8(const float* p) { return _mm512_zextps256_ps512(_mm256_load_ps(p)); }
  static IVec load_act(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static IVec load_q(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static K4Scales k4_scales(const PanelK4& p) {
    return _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.sc)));
  }
  // Chunk k (sub-blocks 2k, 2k + 1): dword 2k in the low eight lanes, 2k + 1 in the high.
  static IVec k4_scale(K4Scales s, int k) {
    return _mm512_permutexvar_epi32(_mm512_set_epi32(2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1,
                                                     2 * k + 1, 2 * k + 1, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k,
                                                     2 * k, 2 * k),
                                    s);
  }
  template <class P>  // PanelK6 or PanelK2: the same sc layout
  static IVec k6_scale(const P& p, int k) { return _mm512_loadu_si512(p.sc[2 * k]); }  // 2k, 2k + 1: adjacent
  static IVec dot_add(IVec acc, IVec w, IVec a, IVec sc) {
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(w, a), sc);
  }
  // As Avx2::keep in act_q8k_avx2.cpp.
  static void keep(IVec& v) { __asm__("" : "+v"(v)); }
  static FVec cvt(IVec v) { return _mm512_cvtepi32_ps(v); }
  static FVec mul(FVec a, FVec b) { return _mm512_mul_ps(a, b); }
  static FVec fmadd(FVec a, FVec b, FVec c) { return _mm512_fmadd_ps(a, b, c); }
  static IVec sub_off(IVec acc, __m256i off) { return _mm512_sub_epi32(acc, _mm512_zextsi256_si512(off)); }
  static float hsum(FVec v) { return _mm512_reduce_add_ps(v); }
};

}  // namespace

void panel_gemm_k4_avx512(const PanelK4* panel, int64_t rows, int64_t nb, const uint8_t* act,
                          size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  PanelCores<Avx512>::panel_gemm(panel, rows, nb, act, act_row_bytes, n_tokens, y, y_stride);
}

void panel_gemm_k2_avx512(const PanelK2* panel, int64_t rows, int64_t nb, const uint8_t* act,
                        size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  PanelCores<Avx512>::panel_gemm(panel, rows, nb, act, act_row_bytes, n_tokens, y, y_stride);
}

void panel_gemm_k6_avx512(const PanelK6* panel, int64_t rows, int64_t nb, const uint8_t* act,
                          size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  PanelCores<Avx512>::panel_gemm(panel, rows, nb, act, act_row_bytes, n_tokens, y, y_stride);
}

}  // namespace th::cpu
