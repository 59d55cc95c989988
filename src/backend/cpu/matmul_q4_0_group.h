// The Q4_0 family's group trait for act_q8_groups.h, in AVX2 (kVnni = false)
// and AVX-512 VNNI (kVnni = true); include it from matmul_q4_0_avx2.cpp and
// matmul_q4_0_avx512.cpp only.
//
// The nibbles q in 0..15 go straight into the multiply as its unsigned operand,
// with the -8 offset taken out per activation block: sum (q - 8) x = sum q x -
// 8 sum x, and -8 sum x is added to the int32 lanes from the prepared group
// (-4 sum x in each of a block's two lanes), so the result is exact.
//
// AVX2: pair sums of vpmaddubsw are at most 2 * 15 * 127 = 3810, so the four
// results of a group add up in int16 (<= 15240) before one vpmaddwd. Per (row,
// token, group of 4 blocks): 4 vpmaddubsw + 1 vpmaddwd + 1 vmulps + 1 vfmadd on
// the two multiply pipes (7, where a per-block kernel spends 12-16), plus 3
// vpaddw, 1 vpaddd and 1 vcvtdq2ps elsewhere. VNNI: 4 vpdpbusd starting from
// the correction, then vcvtdq2ps, vmulps, vfmadd. Unpacking a row's group (4
// loads, 2 vpblendd, 2 vpunpck*qdq, 2 vpsrlw, 4 vpand) is shared by the tile's
// tokens.
#pragma once

#include "backend/cpu/act_q8_groups.h"

namespace th::cpu {
namespace {

// X0..X3, then int32 corrections per lane, then f32 lane scales.
template <bool kVnni>
struct Q4_0Group : GroupLayout<Vec256, 160> {
  using V = Vec256;
  static constexpr int kBlocks = 4;
  static constexpr int kBytes = sizeof(BlockQ4_0);
  // Weight quarter q (8 bytes = 8 elements) comes from block {0, 2, 1, 3}[q]; two int32
  // lanes per quarter.
  static constexpr int lane_block(int l) { return (l / 2 == 1) ? 2 : (l / 2 == 2) ? 1 : l / 2; }
  // Register k holds, per quarter, elements kOffset[k] .. kOffset[k] + 7 of its block.
  static constexpr int kOffset[4] = {0, 16, 8, 24};

  struct Regs {
    __m256i w[4];
  };
  // The group's nibbles as two registers a (qs[0..7] of b0, b2 | b1, b3) and b (qs[8..15]).
  static void nibbles(const uint8_t* g, __m256i& a, __m256i& b) {
    // [b0.qs | b1.qs] from two overlapping 32-byte loads (the second starts 16 bytes before
    // b1.qs, inside the group), likewise [b2.qs | b3.qs]; vpblendd is a 4-per-cycle op, where
    // vinserti128 runs at 1 per cycle.
    const __m256i v01 = _mm256_blend_epi32(loadu(g + 2), loadu(g + kBytes + 2 - 16), 0xF0);
    const __m256i v23 = _mm256_blend_epi32(loadu(g + 2 * kBytes + 2), loadu(g + 3 * kBytes + 2 - 16), 0xF0);
    a = _mm256_unpacklo_epi64(v01, v23);
    b = _mm256_unpackhi_epi64(v01, v23);
  }
  static Regs split(__m256i a, __m256i b) {
    const __m256i m = _mm256_set1_epi8(0x0F);
    return {{_mm256_and_si256(a, m), _mm256_and_si256(_mm256_srli_epi16(a, 4), m), _mm256_and_si256(b, m),
             _mm256_and_si256(_mm256_srli_epi16(b, 4), m)}};
  }
  static Regs load(const uint8_t* g) {
    __m256i a, b;
    nibbles(g, a, b);
    return split(a, b);
  }
  // The packed layout (act_q8_groups.h, Packed): a then b, 64 bytes; load is then two
  // loads, two shifts and four ands, where the file's layout costs four more loads, two
  // blends and two unpacks.
  static constexpr int kImageBytes = 64;
  static void write_image(const uint8_t* g, uint8_t* img) {
    __m256i a, b;
    nibbles(g, a, b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(img), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(img + 32), b);
  }
  static Regs from_image(const uint8_t* img) { return split(kept(loadu(img)), kept(loadu(img + 32))); }
#ifdef __AVX512F__
  // Group8's image: two images interleaved 32 bytes at a time, so [a | a'] and [b | b'].
  static void from_image512(const uint8_t* img, __m512i (&w)[4]) {
    const __m512i a = kept(_mm512_loadu_si512(img)), b = kept(_mm512_loadu_si512(img + 64));
    const __m512i m = _mm512_set1_epi8(0x0F);
    w[0] = _mm512_and_si512(a, m);
    w[1] = _mm512_and_si512(_mm512_srli_epi16(a, 4), m);
    w[2] = _mm512_and_si512(b, m);
    w[3] = _mm512_and_si512(_mm512_srli_epi16(b, 4), m);
  }
#endif
  static __m256i dot(const Regs& r, const uint8_t* a) {
    if constexpr (kVnni) {
      return dot_vnni(r.w, a, kCorrOffset);
    } else {
      const __m256i p0 = _mm256_maddubs_epi16(r.w[0], loadu(a));
      const __m256i p1 = _mm256_maddubs_epi16(r.w[1], loadu(a + 32));
      const __m256i p2 = _mm256_maddubs_epi16(r.w[2], loadu(a + 64));
      const __m256i p3 = _mm256_maddubs_epi16(r.w[3], loadu(a + 96));
      const __m256i p = _mm256_add_epi16(_mm256_add_epi16(p0, p1), _mm256_add_epi16(p2, p3));
      return _mm256_add_epi32(_mm256_madd_epi16(p, _mm256_set1_epi16(1)), loadu(a + kCorrOffset));
    }
  }
  static __m256 dw_lanes(const uint8_t* g, const float* f16) {
    const __m128 d = _mm_setr_ps(f16[load_u16(g)], f16[load_u16(g + 2 * kBytes)], f16[load_u16(g + kBytes)],
                                 f16[load_u16(g + 3 * kBytes)]);
    return _mm256_set_m128(_mm_unpackhi_ps(d, d), _mm_unpacklo_ps(d, d));
  }
  // n Q8_0 blocks at x (34 bytes apart) -> the prepared group at out (blocks past n: zero).
  static void prepare_group(const uint8_t* x, int n, uint8_t* out) {
    std::memset(out, 0, kDxOffset);
    auto* corr = reinterpret_cast<int32_t*>(out + kCorrOffset);
    for (int q = 0; q < 4; ++q) {
      const int b = lane_block(2 * q);
      if (b >= n) continue;
      const auto* qs = reinterpret_cast<const int8_t*>(x + b * kQ8Bytes + 2);
      for (int k = 0; k < 4; ++k) std::memcpy(out + 32 * k + 8 * q, qs + kOffset[k], 8);
      int32_t sum = 0;
      for (int i = 0; i < kQK; ++i) sum += qs[i];
      corr[2 * q] = corr[2 * q + 1] = -4 * sum;
    }
  }
};

}  // namespace
}  // namespace th::cpu
