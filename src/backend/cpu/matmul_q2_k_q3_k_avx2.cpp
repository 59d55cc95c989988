// q2_K and q3_K weights x Q8_K activations with AVX2: the pieces act_q8k.h declares
// (gemv_q2_k_avx2, unpack_q2_k_avx2, and the q3_K ones).
//
// One token streams each super-block once (84 bytes for q2_K, 110 for q3_K), building
// each 32-element chunk's levels from its bits (a 16-bit shift and a mask; q3_K's third bit
// moved into place with one more shift and mask) and multiplying them straight away.
// The offsets are folded in once per block through the activation block sums, as
// matmul_q6_k_avx2.cpp does: q2_K's mins (dmin * m . bsums), q3_K's -4 (4 * s . bsums).
// More tokens go through PanelK2 / PanelK6 and the shared cores.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/act_q8k.h"
#include "backend/cpu/kquant_avx2.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

using namespace kquant_avx2;  // NOLINT: the shared AVX2 k-quant helpers

// The 2-bit fields of chunk j (0..3) of a 128-element half: bits 2j of each of its 32 bytes.
__m256i low_bits(__m256i qs, int j) {
  return _mm256_and_si256(_mm256_srli_epi16(qs, 2 * j), _mm256_set1_epi8(3));
}

// q3_K's third bit of chunk k (0..7), bit k of each hmask byte, moved to bit 2 by one 16-bit
// shift (bits crossing into the next byte land away from bit 2, and the mask drops them).
__m256i high_bit(__m256i hm, int k) {
  const __m256i moved = k >= 2 ? _mm256_srli_epi16(hm, k - 2) : _mm256_slli_epi16(hm, 2 - k);
  return _mm256_and_si256(moved, _mm256_set1_epi8(4));
}

// The 32 levels of chunk k = 4h + j.
__m256i q2_levels(__m256i qs, int j) { return low_bits(qs, j); }
__m256i q3_levels(__m256i qs, __m256i hm, int h, int j) {
  return _mm256_or_si256(low_bits(qs, j), high_bit(hm, 4 * h + j));
}

__m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// A block's sixteen int8 scales widened once to int16, scales 0-7 in both 128-bit halves of
// `lo` and 8-15 in both of `hi`, so that each chunk's scale vector is one in-lane vpshufb
// (chunk_scales' vpshufb + vpmovsxbw per chunk cost one more op, lane-crossing, per chunk).
struct WideScales {
  __m256i lo, hi;
};
WideScales widen(__m128i sc8) {
  const __m256i all = _mm256_cvtepi8_epi16(sc8);
  return {_mm256_permute2x128_si256(all, all, 0x00), _mm256_permute2x128_si256(all, all, 0x11)};
}
// Chunk k: s[2k] in the low eight int16 lanes, s[2k + 1] in the high ones.
__m256i scales_of(const WideScales& w, int k) {
  const int i = k % 4;
  const __m256i pick = _mm256_setr_m128i(_mm_set1_epi16(static_cast<short>(0x0100 + 0x0404 * i)),
                                         _mm_set1_epi16(static_cast<short>(0x0302 + 0x0404 * i)));
  return _mm256_shuffle_epi8(k < 4 ? w.lo : w.hi, pick);
}

float dot_row_q2(const uint8_t* row, const uint8_t* act, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = row + b * sizeof(BlockQ2_K);
    prefetch_ahead<sizeof(BlockQ2_K)>(wb);
    const uint8_t* ab = act + b * kQ8KBytes;
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + offsetof(BlockQ2_K, scales)));
    const __m128i sc8 = _mm_and_si128(packed, _mm_set1_epi8(0xF));
    const __m128i m8 = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0xF));
    const __m256i bsums = load32(ab + offsetof(BlockQ8_K, bsums));
    const __m256i summ = _mm256_madd_epi16(_mm256_cvtepu8_epi16(m8), bsums);
    const WideScales ws = widen(sc8);
    const uint8_t* q8 = ab + offsetof(BlockQ8_K, qs);
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = load32(wb + offsetof(BlockQ2_K, qs) + 32 * h);
      for (int j = 0; j < 4; ++j) {
        const int k = 4 * h + j;
        const __m256i p = _mm256_maddubs_epi16(q2_levels(qs, j), load32(q8 + 32 * k));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scales_of(ws, k), p));
      }
    }
    const float da = load_f32(ab);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(da * load_f16(wb + offsetof(BlockQ2_K, d))), _mm256_cvtepi32_ps(sumi), acc);
    acc = _mm256_fnmadd_ps(_mm256_set1_ps(da * load_f16(wb + offsetof(BlockQ2_K, dmin))), _mm256_cvtepi32_ps(summ),
                           acc);
  }
  return hsum_ps(acc);
}

float dot_row_q3(const uint8_t* row, const uint8_t* act, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = row + b * sizeof(BlockQ3_K);
    prefetch_ahead<sizeof(BlockQ3_K)>(wb);
    const uint8_t* ab = act + b * kQ8KBytes;
    const __m128i sc8 = q3_scales(wb + offsetof(BlockQ3_K, scales));
    const __m256i bsums = load32(ab + offsetof(BlockQ8_K, bsums));
    // Start from -4 * sum_g s[g] * bsum[g].
    __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(),
                                    _mm256_slli_epi32(_mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8), bsums), 2));
    const __m256i hm = load32(wb + offsetof(BlockQ3_K, hmask));
    const WideScales ws = widen(sc8);
    const uint8_t* q8 = ab + offsetof(BlockQ8_K, qs);
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = load32(wb + offsetof(BlockQ3_K, qs) + 32 * h);
      for (int j = 0; j < 4; ++j) {
        const int k = 4 * h + j;
        const __m256i p = _mm256_maddubs_epi16(q3_levels(qs, hm, h, j), load32(q8 + 32 * k));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scales_of(ws, k), p));
      }
    }
    const float d = load_f32(ab) * load_f16(wb + offsetof(BlockQ3_K, d));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_ps(acc);
}

}  // namespace

void unpack_q2_k_avx2(const uint8_t* row, int64_t nb, PanelK2* out) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = row + b * sizeof(BlockQ2_K);
    PanelK2& p = out[b];
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = load32(wb + offsetof(BlockQ2_K, qs) + 32 * h);
      for (int j = 0; j < 4; ++j)
        _mm256_store_si256(reinterpret_cast<__m256i*>(p.q + 128 * h + 32 * j), q2_levels(qs, j));
    }
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + offsetof(BlockQ2_K, scales)));
    const __m128i sc8 = _mm_and_si128(packed, _mm_set1_epi8(0xF));
    for (int k = 0; k < 8; ++k) _mm256_store_si256(reinterpret_cast<__m256i*>(p.sc[k]), chunk_scales(sc8, k));
    const __m128i m8 = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0xF));
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.mins), _mm256_cvtepu8_epi16(m8));
    p.d = load_f16(wb + offsetof(BlockQ2_K, d));
    p.dmin = load_f16(wb + offsetof(BlockQ2_K, dmin));
  }
}

void unpack_q3_k_avx2(const uint8_t* row, int64_t nb, PanelK6* out) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = row + b * sizeof(BlockQ3_K);
    PanelK6& p = out[b];
    const __m256i hm = load32(wb + offsetof(BlockQ3_K, hmask));
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = load32(wb + offsetof(BlockQ3_K, qs) + 32 * h);
      for (int j = 0; j < 4; ++j)
        _mm256_store_si256(reinterpret_cast<__m256i*>(p.q + 128 * h + 32 * j), q3_levels(qs, hm, h, j));
    }
    const __m128i sc8 = q3_scales(wb + offsetof(BlockQ3_K, scales));
    for (int k = 0; k < 8; ++k) _mm256_store_si256(reinterpret_cast<__m256i*>(p.sc[k]), chunk_scales(sc8, k));
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.m32), _mm256_slli_epi16(_mm256_cvtepi8_epi16(sc8), 2));
    p.d = load_f16(wb + offsetof(BlockQ3_K, d));
  }
}

void gemv_q2_k_avx2(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                    const uint8_t* act, float* y) {
  const int64_t nb = cols / kQKK;
  for (int64_t r = r0; r < r1; ++r) y[r] = dot_row_q2(w + r * w_row_bytes, act, nb);
}

void gemv_q3_k_avx2(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                    const uint8_t* act, float* y) {
  const int64_t nb = cols / kQKK;
  for (int64_t r = r0; r < r1; ++r) y[r] = dot_row_q3(w + r * w_row_bytes, act, nb);
}

}  // namespace th::cpu
