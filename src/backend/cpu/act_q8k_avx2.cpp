// Q8_K conversion and the panel multiply cores with AVX2 (compiled with -mavx2 -mfma;
// called only where available_isas() has Avx2).
//
// The cores (act_q8k_driver.h) compute a 1-row x 4-token register tile over a panel row
// with vpmaddubsw and vpmaddwd on 32-element chunks. That is 2
// multiplies per 32 multiply-adds and about 40 instructions per token and 256 weights
// (callgrind), against llama.cpp's per-token loop, which also re-unpacks nibbles, scales
// and mins for every token. Zen 3 issues two of these multiplies per cycle (measured),
// so the multiply bound is 32 multiply-adds per cycle: 203 GOPS at 3.18 GHz; the cores
// reach 120-140 in isolation.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/act_q8k_driver.h"

namespace th::cpu {

namespace {

float hmax_ps(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

void quantize_block(const float* x, uint8_t* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  // max(|x|, m) returns m when |x| is NaN (vmaxps gives its second operand), so NaNs are
  // skipped exactly as the reference's `ax > amax` skips them.
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < kQKK; i += 8) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask), m);
  const float amax = hmax_ps(m);
  if (amax == 0.0f) {
    std::memset(out, 0, kQ8KBytes);
    return;
  }
  // The reference keeps the first value of largest magnitude; its sign picks the sign of d.
  const __m256 vamax = _mm256_set1_ps(amax);
  int first = 0;
  for (int i = 0; i < kQKK; i += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask), vamax, _CMP_EQ_OQ));
    if (mask != 0) {
      first = i + __builtin_ctz(static_cast<unsigned>(mask));
      break;
    }
  }
  const float iscale = -127.f / x[first];
  const __m256 vs = _mm256_set1_ps(iscale);
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256 lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
  __m256i partial[8];  // per chunk: four partial sums of each 16-element group (lane 0: group 2k, lane 1: 2k+1)
  for (int k = 0; k < 8; ++k) {
    __m256i i32[4];
    for (int v = 0; v < 4; ++v) {
      __m256 f = _mm256_mul_ps(_mm256_loadu_ps(x + 32 * k + 8 * v), vs);
      f = _mm256_and_ps(f, _mm256_cmp_ps(f, f, _CMP_ORD_Q));  // NaN (inf * 0) -> 0, as the reference
      f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);             // +-inf (denormal max) saturate, as the reference
      i32[v] = _mm256_cvtps_epi32(f);                          // round half to even (default MXCSR)
    }
    // Pack to bytes (no saturation left to do) and undo the packs' per-lane order.
    const __m256i i16a = _mm256_packs_epi32(i32[0], i32[1]);
    const __m256i i16b = _mm256_packs_epi32(i32[2], i32[3]);
    const __m256i q = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(i16a, i16b), perm);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + kQsOffset + 32 * k), q);
    partial[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
  }
  // Two rounds of hadd leave, per 128-bit lane, the group sums of four chunks: lane 0 the
  // even groups, lane 1 the odd ones; pack to int16 and interleave the lanes back.
  const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(partial[0], partial[1]), _mm256_hadd_epi32(partial[2], partial[3]));
  const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(partial[4], partial[5]), _mm256_hadd_epi32(partial[6], partial[7]));
  const __m256i s16 = _mm256_packs_epi32(h0, h1);  // lane 0: g0 g2 .. g14, lane 1: g1 g3 .. g15
  const __m128i even = _mm256_castsi256_si128(s16), odd = _mm256_extracti128_si256(s16, 1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + kBsumsOffset), _mm_unpacklo_epi16(even, odd));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + kBsumsOffset + 16), _mm_unpackhi_epi16(even, odd));
  const float d = 1 / iscale;
  std::memcpy(out, &d, sizeof d);
}

// The AVX2 primitives of the cores. 1 x 4 tiles: the activation vectors go straight into
// vpmaddubsw as memory operands, so a second row saves no loads, while its eight more
// accumulators (int and float) make GCC spill in the per-block epilogue: 1 x 4 ran at
// 138 GOPS against 2 x 4's 130, 1 x 6's 117-143 and 1 x 8's 92-107 (one thread,
// L1/L2-resident panel, 3.18 GHz Zen 3).
struct Avx2 {
  using IVec = __m256i;
  using FVec = __m256;
  using K4Scales = const PanelK4*;
  static constexpr int kChunk = 32;
  static constexpr int kTileRows = 1;
  static IVec izero() { return _mm256_setzero_si256(); }
  static FVec fzero() { return _mm256_setzero_ps(); }
  static FVec set1(float f) { return _mm256_set1_ps(f); }
  static FVec load8(const float* p) { return _mm256_load_ps(p); }
  static IVec load_act(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static IVec load_q(const uint8_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
  static K4Scales k4_scales(const PanelK4& p) { return &p; }
  static IVec k4_scale(K4Scales p, int k) {
    int32_t sc2;
    std::memcpy(&sc2, p->sc[k], 4);
    return _mm256_set1_epi32(sc2);
  }
  template <class P>  // PanelK6 or PanelK2: the same sc layout
  static IVec k6_scale(const P& p, int k) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p.sc[k])); }
  static IVec dot_add(IVec acc, IVec w, IVec a, IVec sc) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), sc));
  }
  // Pins an accumulator to a register at this point: without it GCC 12 sums each iteration's
  // products as a tree and shuffles the eight accumulators through extra moves and a spill
  // (50 instructions per 256 multiply-adds instead of about 30; callgrind).
  static void keep(IVec& v) { __asm__("" : "+x"(v)); }
  static FVec cvt(IVec v) { return _mm256_cvtepi32_ps(v); }
  static FVec mul(FVec a, FVec b) { return _mm256_mul_ps(a, b); }
  static FVec fmadd(FVec a, FVec b, FVec c) { return _mm256_fmadd_ps(a, b, c); }
  static IVec sub_off(IVec acc, __m256i off) { return _mm256_sub_epi32(acc, off); }
  static float hsum(FVec v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

}  // namespace

void quantize_row_q8_k_avx2(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i) quantize_block(x + i * kQKK, out + i * kQ8KBytes);
}

void panel_gemm_k4_avx2(const PanelK4* panel, int64_t rows, int64_t nb, const uint8_t* act, size_t act_row_bytes,
                        int64_t n_tokens, float* y, int64_t y_stride) {
  PanelCores<Avx2>::panel_gemm(panel, rows, nb, act, act_row_bytes, n_tokens, y, y_stride);
}

void panel_gemm_k2_avx2(const PanelK2* panel, int64_t rows, int64_t nb, const uint8_t* act,
                        size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  PanelCores<Avx2>::panel_gemm(panel, rows, nb, act, act_row_bytes, n_tokens, y, y_stride);
}

void panel_gemm_k6_avx2(const PanelK6* panel, int64_t rows, int64_t nb, const uint8_t* act, size_t act_row_bytes,
                        int64_t n_tokens, float* y, int64_t y_stride) {
  PanelCores<Avx2>::panel_gemm(panel, rows, nb, act, act_row_bytes, n_tokens, y, y_stride);
}

}  // namespace th::cpu
