// q6_K weights x Q8_K activations with AVX2.
//
// The bit assembly follows ggml_vec_dot_q6_K_q8_K, but the -32 offset is folded in
// through the activation block sums (32 * s . bsums, one vpmaddwd per block) instead of
// ggml's extra vpmaddubsw of 32 against every activation vector and a subtract: 8 fewer
// multiplies and 8 fewer subtracts per 256 weights. More than one token goes through
// PanelK6 and the shared 1x4 core.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/act_q8k.h"
#include "backend/cpu/kquant_avx2.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

using namespace kquant_avx2;  // NOLINT: the shared AVX2 k-quant helpers

// The levels 0..63 of one 128-element half: quarters g = 0..3 (32 elements each).
struct Half {
  __m256i q[4];
};

Half unpack_half(const uint8_t* ql, const uint8_t* qh) {
  const __m256i m4 = _mm256_set1_epi8(0xF), m2 = _mm256_set1_epi8(3);
  const __m256i a = kept(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql)));
  const __m256i c = kept(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32)));
  const __m256i h = kept(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh)));
  Half out;
  out.q[0] = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_slli_epi16(_mm256_and_si256(h, m2), 4));
  out.q[1] = _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 4));
  out.q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2), 4));
  out.q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m2), 4));
  return out;
}

float dot_row(const uint8_t* row, const uint8_t* act, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = row + b * sizeof(BlockQ6_K);
    prefetch_ahead<sizeof(BlockQ6_K)>(wb);
    const uint8_t* ab = act + b * kQ8KBytes;
    const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + offsetof(BlockQ6_K, scales)));
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab + offsetof(BlockQ8_K, bsums)));
    // Start from -32 * sum_g s[g] * bsum[g].
    __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(),
                                    _mm256_slli_epi32(_mm256_madd_epi16(_mm256_cvtepi8_epi16(scales8), bsums), 5));
    const uint8_t* q8 = ab + offsetof(BlockQ8_K, qs);
    for (int h = 0; h < 2; ++h) {
      const Half hq = unpack_half(wb + offsetof(BlockQ6_K, ql) + 64 * h, wb + offsetof(BlockQ6_K, qh) + 32 * h);
      for (int g = 0; g < 4; ++g) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 128 * h + 32 * g));
        const __m256i p = _mm256_madd_epi16(chunk_scales(scales8, 4 * h + g), _mm256_maddubs_epi16(hq.q[g], a));
        sumi = _mm256_add_epi32(sumi, p);
      }
    }
    const float d = load_f32(ab) * load_f16(wb + offsetof(BlockQ6_K, d));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_ps(acc);
}

}  // namespace

void unpack_q6_k_avx2(const uint8_t* row, int64_t nb, PanelK6* out) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = row + b * sizeof(BlockQ6_K);
    PanelK6& p = out[b];
    for (int h = 0; h < 2; ++h) {
      const Half hq = unpack_half(wb + offsetof(BlockQ6_K, ql) + 64 * h, wb + offsetof(BlockQ6_K, qh) + 32 * h);
      for (int g = 0; g < 4; ++g)
        _mm256_store_si256(reinterpret_cast<__m256i*>(p.q + 128 * h + 32 * g), hq.q[g]);
    }
    const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + offsetof(BlockQ6_K, scales)));
    for (int k = 0; k < 8; ++k)
      _mm256_store_si256(reinterpret_cast<__m256i*>(p.sc[k]), chunk_scales(scales8, k));
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.m32), _mm256_slli_epi16(_mm256_cvtepi8_epi16(scales8), 5));
    p.d = load_f16(wb + offsetof(BlockQ6_K, d));
  }
}

void gemv_q6_k_avx2(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                    const uint8_t* act, float* y) {
  const int64_t nb = cols / kQKK;
  for (int64_t r = r0; r < r1; ++r) y[r] = dot_row(w + r * w_row_bytes, act, nb);
}

}  // namespace th::cpu
