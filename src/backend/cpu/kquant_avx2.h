// What the AVX2 k-quant kernels (matmul_q2_k_q3_k_avx2.cpp, matmul_q4_k_q5_k_avx2.cpp,
// matmul_q6_k_avx2.cpp) share: the Q8_K activation block's stride, horizontal
// sums, unaligned scalar loads and the 6-bit scale/min unpacking of Q4_K and
// Q5_K (and, through tile_table.h, kept). Include only from translation units
// compiled for AVX2 (+F16C).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/cpu/tile_table.h"
#include "tensor/quant_blocks.h"

namespace th::cpu::kquant_avx2 {

inline constexpr size_t kQ8KBytes = sizeof(BlockQ8_K);

inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float load_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}

inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _cvtsh_ss(h);
}

// The 8 scales and 8 mins of a block as int16 (scales in the low 128 bits): the shuffle of
// unpack_k4_scales on one vector. Reads 16 bytes at scales12, 4 past the 12 scale bytes,
// which are still inside the block (its quants). In scalar code this shuffle cost about
// 40 instructions per block, most of them moves through the stack (callgrind).
inline __m256i scales_and_mins(const uint8_t* scales12) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales12));  // words u0 u1 u2 -
  const __m128i v = _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 1, 2, 0));                 // u0 u2 u1 u2
  const __m128i w = _mm_shuffle_epi32(x, _MM_SHUFFLE(1, 1, 0, 0));                 // u0 u0 u1 u1
  // Words 0 and 2: scales 0-3, mins 0-3, the low six bits of u0 and u1.
  const __m128i lo = _mm_and_si128(v, _mm_set1_epi32(0x3f3f3f3f));
  // Words 1 and 3: scales 4-7 (low nibbles of u2) and mins 4-7 (high nibbles), each with
  // the top two bits of u0 / u1 as bits 4-5.
  const __m128i nib = _mm_and_si128(_mm_srlv_epi32(v, _mm_setr_epi32(0, 0, 0, 4)), _mm_set1_epi32(0x0f0f0f0f));
  const __m128i top = _mm_and_si128(_mm_srli_epi32(w, 2), _mm_set1_epi32(0x30303030));
  return _mm256_cvtepu8_epi16(_mm_blend_epi32(lo, _mm_or_si128(nib, top), 0b1010));
}

// The int16 scale vector of 32-element chunk k of a block with 16-element sub-blocks (q2_K,
// q3_K, q6_K): s[2k] in the low eight lanes, s[2k+1] in the high ones, from 16 int8 scales.
inline __m256i chunk_scales(__m128i scales8, int k) {
  const __m128i idx = _mm_set_epi64x(0x0101010101010101LL * (2 * k + 1), 0x0101010101010101LL * (2 * k));
  return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales8, idx));
}

// q3_K's sixteen 6-bit scales, minus 32, as int8: scale j's low nibble is nibble j / 8 of byte
// j % 8, its top 2 bits are bits 2 (j / 4) of byte 8 + j % 4. Two loads (not one of 16
// bytes: the last 4 would be past the block, maybe past the mapping), in vector registers
// throughout (the scalar form spilled through the stack: 20 more instructions a block).
inline __m128i q3_scales(const uint8_t* scales12) {
  uint32_t top;
  std::memcpy(&top, scales12 + 8, 4);
  const __m128i low8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales12));
  const __m128i m4 = _mm_set1_epi8(0xF);
  const __m128i low = _mm_unpacklo_epi64(_mm_and_si128(low8, m4), _mm_and_si128(_mm_srli_epi16(low8, 4), m4));
  // Dword g: the four top bytes, shifted right by 2g so that scale 4g + i's bits sit at bits 0-1 of byte i.
  const __m128i rep = _mm_set1_epi32(static_cast<int>(top));
  const __m128i high = _mm_and_si128(_mm_srlv_epi32(rep, _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
  return _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32));
}

// vpshufb pattern that broadcasts int16 lane i of each 128-bit half.
inline __m256i lane16(int i) { return _mm256_set1_epi16(static_cast<short>(0x0100 + 0x0202 * i)); }

// A one-token dot product streams its row from DRAM: ask for the lines of the block
// kStreamPrefetchBytes (tile_table.h) ahead, every line the block spans (1 -> 4 KiB: 1.1B q4_K
// decode, whose one-token path this was on AVX-512 too until session 21, 58 -> 70% of bandwidth).
template <size_t kBlockBytes>
inline void prefetch_ahead(const uint8_t* block) {
#pragma GCC unroll 4
  for (size_t o = 0; o < kBlockBytes + 63; o += 64)
    prefetch_stream(block + o);
}

}  // namespace th::cpu::kquant_avx2
