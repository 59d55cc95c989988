// AVX2 activation conversion to Q8_0: the same bytes as quantize_row(Q8_0)
// (tested), eight lanes at a time. Each IEEE step of the reference is one
// vector op here (the division and reciprocal stay scalar, once per block),
// and roundf's half-away-from-zero is rebuilt from truncation, since
// vroundps has no such mode.
#include <immintrin.h>

#include "backend/cpu/act_q8.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

// roundf(v) for |v| <= 127: t = trunc(v), then one step away from zero when |v - t| >= 0.5
// (v - t is exact). Adding 0.5 and truncating would be wrong for 0.49999997, whose sum
// rounds up to 1.
inline __m256 round_half_away(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 frac = _mm256_and_ps(_mm256_sub_ps(v, t), abs_mask);
  const __m256 step = _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                    _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_andnot_ps(abs_mask, v)));
  return _mm256_add_ps(t, step);
}

}  // namespace

void convert_act_q8_0_avx2(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<BlockQ8_0*>(dst);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    __m256 v[4];
    // max_ps(a, acc) returns acc when a is nan, so a nan is skipped as std::max skips it.
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + 8 * i);
      amax = _mm256_max_ps(_mm256_and_ps(v[i], abs_mask), amax);
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float d = _mm_cvtss_f32(m) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = static_cast<uint16_t>(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) {
      // max_ps(v, lo) returns lo for a nan v: the reference's fmax(nan, -127).
      const __m256 c = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[i], vid), lo), hi);
      q[i] = _mm256_cvttps_epi32(round_half_away(c));
    }
    // Packing works within 128-bit lanes: int32 0-3|4-7 of each pair interleave, which
    // one permute at the end undoes.
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs),
                        _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
}

}  // namespace th::cpu
