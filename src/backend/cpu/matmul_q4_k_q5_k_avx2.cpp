// q4_K and q5_K weights x Q8_K activations with AVX2: the pieces act_q8k.h declares
// (gemv_q4_k_avx2, unpack_q4_k_avx2, and the q5_K ones), one template for both formats,
// which differ only in how a level is made from its bits (the traits Q4K and Q5K).
//
// One token (decode) is memory-bound: each super-block (144 bytes for q4_K, 176 for q5_K)
// is read once and multiplied straight from its bits as ggml_vec_dot_q4_K_q8_K does (no
// panel: storing and reloading the unpacked bytes would only add work). More tokens go
// through PanelK4: the row is unpacked once and the register-tiled core
// (act_q8k_driver.h) reuses it for every token.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/act_q8k.h"
#include "backend/cpu/kquant_avx2.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

using namespace kquant_avx2;  // NOLINT: the shared AVX2 k-quant helpers

// A format's levels come from a trait D:
//   Block                  BlockQ4_K or BlockQ5_K (d, dmin, scales, qs at the same names)
//   High high(block)       what the format loads per block beside the nibbles (q5_K: qh)
//   levels(nib, high, j)   sub-block j's 32 levels from its nibbles (masked to 0..15)

// q4_K: the levels are the nibbles.
struct Q4K {
  using Block = BlockQ4_K;
  struct High {};
  static High high(const uint8_t*) { return {}; }
  static __m256i levels(__m256i nib, High, int) { return nib; }
};

// q5_K: each level's fifth bit comes from qh (bit j of qh[l] for element 32j + l), as
// ggml_vec_dot_q5_K_q8_K does.
struct Q5K {
  using Block = BlockQ5_K;
  using High = __m256i;  // qh
  static High high(const uint8_t* wb) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + offsetof(BlockQ5_K, qh)));
  }
  // The 32 levels of sub-block j: nibbles `nib` plus bit j of qh moved to bit 4 with one
  // 16-bit shift: bits that cross into the neighbouring byte land below bit 4 (left shifts
  // of at most 4) or above it (right shifts of at most 3), so the mask keeps only the
  // wanted bit. Two instructions instead of ggml's four.
  static __m256i levels(__m256i nib, High qh, int j) {
    const __m256i moved = j <= 4 ? _mm256_slli_epi16(qh, 4 - j) : _mm256_srli_epi16(qh, j - 4);
    return _mm256_or_si256(nib, _mm256_and_si256(moved, _mm256_set1_epi8(16)));
  }
};
// One row's dot product with one activation row. (Two rows at a time, sharing the
// activation loads and block sums, took 10% fewer instructions but ran slower: 12.2 vs
// 14.5 GB/s from cache and 5.5 vs 10.0 GB/s streaming a 32000-row matrix from DRAM.)
template <class D>
float dot_row(const uint8_t* row, const uint8_t* act, int64_t nb) {
  using Block = typename D::Block;
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
    const __m128i bsum32 = _mm_hadd_epi16(bs_lo, bs_hi);  // sums of each 32-element sub-block
    const uint8_t* q8 = ab + offsetof(BlockQ8_K, qs);
    const uint8_t* wb = row + b * sizeof(Block);
    prefetch_ahead<sizeof(Block)>(wb);
    const __m256i sm = scales_and_mins(wb + offsetof(Block, scales));
    // Mins: -dmin * d_a * sum_j m_j * bsum32_j.
    const __m128i prod = _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), bsum32);  // mins . bsum32
    uint32_t d_dmin;
    std::memcpy(&d_dmin, wb, 4);
    const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(d_dmin)));  // d, dmin, 0, 0
    const __m256 coef = _mm256_mul_ps(_mm256_permutevar8x32_ps(_mm256_castps128_ps256(dm), pick_d_dmin), da);
    const __m256i scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));
    const auto high = D::high(wb);
    const uint8_t* qs = wb + offsetof(Block, qs);
    __m256i sumi = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i bits = kept(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c)));
      const __m256i lo = D::levels(_mm256_and_si256(bits, m4), high, 2 * c);
      const __m256i hi = D::levels(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), high, 2 * c + 1);
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

// y[r] = dot(row r, act row 0) for r in [r0, r1).
template <class D>
void gemv(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
             float* y) {
  const int64_t nb = cols / kQKK;
  for (int64_t r = r0; r < r1; ++r) y[r] = dot_row<D>(w + r * w_row_bytes, act, nb);
}

// nb blocks of a row -> PanelK4s.
template <class D>
void unpack(const uint8_t* row, int64_t nb, PanelK4* out) {
  using Block = typename D::Block;
  const __m256i m4 = _mm256_set1_epi8(0xF);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = row + b * sizeof(Block);
    PanelK4& p = out[b];
    unpack_k4_scales(wb + offsetof(Block, scales), load_f16(wb), load_f16(wb + offsetof(Block, dmin)), p);
    const auto high = D::high(wb);
    const uint8_t* qs = wb + offsetof(Block, qs);
    for (int c = 0; c < 4; ++c) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
      _mm256_store_si256(reinterpret_cast<__m256i*>(p.q + 64 * c), D::levels(_mm256_and_si256(bits, m4), high, 2 * c));
      _mm256_store_si256(reinterpret_cast<__m256i*>(p.q + 64 * c + 32),
                         D::levels(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), high, 2 * c + 1));
    }
  }
}

}  // namespace

void unpack_q4_k_avx2(const uint8_t* row, int64_t nb, PanelK4* out) { unpack<Q4K>(row, nb, out); }
void unpack_q5_k_avx2(const uint8_t* row, int64_t nb, PanelK4* out) { unpack<Q5K>(row, nb, out); }

void gemv_q4_k_avx2(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                    const uint8_t* act, float* y) {
  gemv<Q4K>(w, w_row_bytes, cols, r0, r1, act, y);
}
void gemv_q5_k_avx2(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                    const uint8_t* act, float* y) {
  gemv<Q5K>(w, w_row_bytes, cols, r0, r1, act, y);
}

}  // namespace th::cpu
