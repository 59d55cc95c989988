// Q8_K conversion and the panel multiply cores with AVX-512 BW + VNNI (compiled with
// -mavx512*; called only where available_isas() has Avx512); the cores' loops are
// act_q8k_driver.h's. A 2-row x 4-token tile on 64-element vectors: vpmaddubsw then
// vpdpwssd (multiply by the int16 scales and add to the accumulator in one instruction), 2
// instructions per 64 multiply-adds per (row, token) against AVX2's 3 per 32. With 32
// vector registers all eight int32 accumulators stay in registers through a block; GCC keeps
// the float sums on the stack, one load and store per block.
// GCC 12's AVX-512 headers build some results from _mm512_undefined_*() and then warn
// that it is uninitialized once inlined (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/act_q8k_driver.h"

namespace th::cpu {

namespace {

// One block as act_q8k_avx2.cpp's quantize_block, 16 floats a vector: the same steps (and
// so the same bytes); the four vectors of a 64-byte chunk packed to bytes by two packs and a
// dword permutation, the group sums from the bytes by vpdpbusd with ones and two rounds of
// pairwise adds across the chunks (even and odd dwords by vpermt2d).
void quantize_block(const float* x, uint8_t* out) {
  __m512 m[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  // max(|x|, m) returns m when |x| is NaN (vmaxps gives its second operand): NaNs are
  // skipped exactly as the reference's `ax > amax` skips them.
  for (int i = 0; i < kQKK; i += 64)
    for (int v = 0; v < 4; ++v) m[v] = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + i + 16 * v)), m[v]);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m[0], m[1]), _mm512_max_ps(m[2], m[3])));
  if (amax == 0.0f) {
    std::memset(out, 0, kQ8KBytes);
    return;
  }
  // The reference keeps the first value of largest magnitude; its sign picks the sign of d.
  const __m512 vamax = _mm512_set1_ps(amax);
  int first = 0;
  for (int i = 0; i < kQKK; i += 16) {
    const __mmask16 eq = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + i)), vamax, _CMP_EQ_OQ);
    if (eq != 0) {
      first = i + __builtin_ctz(eq);
      break;
    }
  }
  const float iscale = -127.f / x[first];
  const __m512 vs = _mm512_set1_ps(iscale);
  const __m512 lo = _mm512_set1_ps(-128.0f), hi = _mm512_set1_ps(127.0f);
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i quads[4];  // per chunk: the sums of each four bytes (dwords 4g .. 4g + 3: group g of the chunk)
  for (int k = 0; k < 4; ++k) {
    __m512i i32[4];
    for (int v = 0; v < 4; ++v) {
      const __m512 f = _mm512_mul_ps(_mm512_loadu_ps(x + 64 * k + 16 * v), vs);
      // NaN (inf * 0) -> 0 and +-inf (denormal max) saturate, as the reference.
      const __m512 c = _mm512_min_ps(_mm512_maskz_max_ps(_mm512_cmp_ps_mask(f, f, _CMP_ORD_Q), f, lo), hi);
      i32[v] = _mm512_cvtps_epi32(c);  // round half to even (default MXCSR)
    }
    // Dword 4j + v of the packs holds vector v's elements 4j .. 4j + 3: back to element order.
    const __m512i q = _mm512_permutexvar_epi32(
        order, _mm512_packs_epi16(_mm512_packs_epi32(i32[0], i32[1]), _mm512_packs_epi32(i32[2], i32[3])));
    _mm512_storeu_si512(out + kQsOffset + 64 * k, q);
    quads[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, q);
  }
  // Pairwise sums twice: dword i of pairs(a, b) is a's dwords 2i + (0, 1) summed for i < 8,
  // b's 2(i - 8) + (0, 1) for i >= 8.
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  auto pairs = [&](__m512i a, __m512i b) {
    return _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b), _mm512_permutex2var_epi32(a, odd, b));
  };
  const __m512i sums = pairs(pairs(quads[0], quads[1]), pairs(quads[2], quads[3]));  // group g in dword g
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + kBsumsOffset), _mm512_cvtepi32_epi16(sums));
  const float d = 1 / iscale;
  std::memcpy(out, &d, sizeof d);
}

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

void quantize_row_q8_k_avx512(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i) quantize_block(x + i * kQKK, out + i * kQ8KBytes);
}

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
