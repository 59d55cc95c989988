// AVX-512 activation conversion to Q8_0: the AVX2 algorithm (see
// act_q8_avx2.cpp) with a block in two 16-lane registers, and vpmovsdb to
// narrow int32 to int8 in element order.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wall reports as
// uninitialized (GCC bug 105593, fixed in 12.3).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "backend/cpu/act_q8.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

// roundf(v) for |v| <= 127, from truncation (see act_q8_avx2.cpp).
inline __m512 round_half_away(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask16 away = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN));
  const __m512 step = _mm512_castsi512_ps(_mm512_or_si512(sign, _mm512_castps_si512(_mm512_set1_ps(1.0f))));
  return _mm512_mask_add_ps(t, away, t, step);
}

}  // namespace

void convert_act_q8_0_avx512(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<BlockQ8_0*>(dst);
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    // max_ps(a, acc) returns acc when a is nan: a nan is skipped, as std::max skips it.
    const __m512 amax = _mm512_max_ps(_mm512_abs_ps(v1), _mm512_max_ps(_mm512_abs_ps(v0), _mm512_setzero_ps()));
    const float d = _mm512_reduce_max_ps(amax) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = static_cast<uint16_t>(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    const __m512 vid = _mm512_set1_ps(id);
    // max_ps(v, lo) returns lo for a nan v: the reference's fmax(nan, -127).
    const __m512 c0 = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v0, vid), lo), hi);
    const __m512 c1 = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v1, vid), lo), hi);
    const __m128i q0 = _mm512_cvtsepi32_epi8(_mm512_cvttps_epi32(round_half_away(c0)));
    const __m128i q1 = _mm512_cvtsepi32_epi8(_mm512_cvttps_epi32(round_half_away(c1)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].qs), q0);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].qs + 16), q1);
  }
}

}  // namespace th::cpu
