// q5_K weights x Q8_K activations with AVX2: as matmul_q4_k_avx2.cpp, with each level's
// fifth bit taken from qh (bit j of qh[l] for element 32j + l), as
// ggml_vec_dot_q5_K_q8_K does.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/act_q8k.h"
#include "backend/cpu/kquant_avx2.h"
#include "backend/cpu/matmul_kernels.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

using namespace kquant_avx2;  // NOLINT: the shared AVX2 k-quant helpers

// The 32 levels of sub-block j: nibbles `nib` (already masked to 0..15) plus bit j of qh
// moved to bit 4 with one 16-bit shift: bits that cross into the neighbouring byte land
// below bit 4 (left shifts of at most 4) or above it (right shifts of at most 3), so the
// mask keeps only the wanted bit. Two instructions instead of ggml's four.
__m256i with_bit4(__m256i nib, __m256i qh, int j) {
  const __m256i moved = j <= 4 ? _mm256_slli_epi16(qh, 4 - j) : _mm256_srli_epi16(qh, j - 4);
  return _mm256_or_si256(nib, _mm256_and_si256(moved, _mm256_set1_epi8(16)));
}

// One row's dot product with one activation row. (Two rows at a time, sharing the
// activation loads and block sums, took 10% fewer instructions but ran slower: 12.2 vs
// 14.5 GB/s from cache and 5.5 vs 10.0 GB/s streaming a 32000-row matrix from DRAM.)
float dot_row(const uint8_t* row, const uint8_t* act, int64_t nb) {
  const __m256i m4 = _mm256_set1_epi8(0xF);
  // One float accumulator: lanes 0-3 take the scaled quants (d * d_a), lanes 4-7 the
  // mins (-dmin * d_a), so each block ends in one conversion and one multiply-add.
  // In all, q4_K takes 82 instructions per 144-byte block, q5_K 107 per 176 (callgrind).
  const __m256 sign = _mm256_setr_ps(1, 1, 1, 1, -1, -1, -1, -1);
  const __m256i pick_d_dmin = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* ab = act + b * kQ8KBytes;
    const __m256 da = _mm256_mul_ps(_mm256_set1_ps(load_f32(ab)), sign);
    const __m128i bs_lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ab + offsetof(BlockQ8_K, bsums)));
    const __m128i bs_hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ab + offsetof(BlockQ8_K, bsums) + 16));
    const __m128i bsum32 = _mm_hadd_epi16(bs_lo, bs_hi);
    const uint8_t* q8 = ab + offsetof(BlockQ8_K, qs);
    const uint8_t* wb = row + b * sizeof(BlockQ5_K);
    const __m256i sm = scales_and_mins(wb + offsetof(BlockQ5_K, scales));
    const __m128i prod = _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), bsum32);  // mins . bsum32
    uint32_t d_dmin;
    std::memcpy(&d_dmin, wb, 4);
    const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(d_dmin)));  // d, dmin, 0, 0
    const __m256 coef = _mm256_mul_ps(_mm256_permutevar8x32_ps(_mm256_castps128_ps256(dm), pick_d_dmin), da);
    const __m256i scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + offsetof(BlockQ5_K, qh)));
    const uint8_t* qs = wb + offsetof(BlockQ5_K, qs);
    __m256i sumi = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
      const __m256i lo = with_bit4(_mm256_and_si256(bits, m4), qh, 2 * c);
      const __m256i hi = with_bit4(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), qh, 2 * c + 1);
      const __m256i a_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 64 * c));
      const __m256i a_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 64 * c + 32));
      const __m256i p_lo =
          _mm256_madd_epi16(_mm256_shuffle_epi8(scales, lane16(2 * c)), _mm256_maddubs_epi16(lo, a_lo));
      const __m256i p_hi =
          _mm256_madd_epi16(_mm256_shuffle_epi8(scales, lane16(2 * c + 1)), _mm256_maddubs_epi16(hi, a_hi));
      sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p_lo, p_hi));
    }
    const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sumi), _mm256_extracti128_si256(sumi, 1));
    const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(s4), prod, 1);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(both), coef, acc);
  }
  return hsum_ps(acc);
}

}  // namespace

void unpack_q5_k_avx2(const uint8_t* row, int64_t nb, PanelK4* out) {
  const __m256i m4 = _mm256_set1_epi8(0xF);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = row + b * sizeof(BlockQ5_K);
    PanelK4& p = out[b];
    unpack_k4_scales(wb + offsetof(BlockQ5_K, scales), load_f16(wb), load_f16(wb + offsetof(BlockQ5_K, dmin)), p);
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + offsetof(BlockQ5_K, qh)));
    const uint8_t* qs = wb + offsetof(BlockQ5_K, qs);
    for (int c = 0; c < 4; ++c) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
      _mm256_store_si256(reinterpret_cast<__m256i*>(p.q + 64 * c), with_bit4(_mm256_and_si256(bits, m4), qh, 2 * c));
      _mm256_store_si256(reinterpret_cast<__m256i*>(p.q + 64 * c + 32),
                         with_bit4(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), qh, 2 * c + 1));
    }
  }
}

namespace {

void gemm(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
          size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  if (n_tokens == 1) return gemv_q5_k_avx2(w, w_row_bytes, cols, r0, r1, act, y);
  gemm_via_panels<PanelK4>(unpack_q5_k_avx2, panel_gemm_k4_avx2, w, w_row_bytes, cols, r0, r1, act, act_row_bytes,
                           n_tokens, y, y_stride);
}

}  // namespace

void gemv_q5_k_avx2(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                    const uint8_t* act, float* y) {
  const int64_t nb = cols / kQKK;
  for (int64_t r = r0; r < r1; ++r) y[r] = dot_row(w + r * w_row_bytes, act, nb);
}

MatmulKernel matmul_q5_k_avx2() {
  return {DType::Q5_K, DType::Q8_K, Isa::Avx2, quantize_row_q8_k_avx2, gemm};
}

}  // namespace th::cpu
