// The IQ4_XS group trait (IQ4_XS weights x Q8_K activations, AVX-512 VNNI, on weights
// repacked at load) for kquant_groups_avx512.h's super-block driver; include it from
// matmul_iq4_xs_avx512.cpp (levels by vpshufb) and matmul_iq4_xs_avx512vbmi.cpp (by vpermb)
// only. The layout, the ops and the rounding: matmul_iq4_xs_avx512.cpp.
#pragma once

#include "backend/cpu/kquant_groups_avx512.h"
#include "backend/cpu/matmul_iq4_xs_tile.h"

namespace th::cpu {
namespace {

// kVbmi (matmul_iq4_xs_avx512vbmi.cpp, CPUs with AVX-512 VBMI): the levels by vpermb from the
// 16 levels four times over, which reads an index's low six bits only, so the nibbles need no
// masks (IQ4_NL's trick, matmul_iq4_nl_group.h): 4 vpermb where the plain form takes 4 ands
// and 4 vpshufb a super-block.
template <bool kVbmi>
struct IQ4XSGroup : LaneOffset<7> {  // levels + 128
  static constexpr int kSbBytes = sizeof(BlockIQ4_XS);  // 136
  static constexpr int kImageBytes = 128;                // the nibbles; a packed row holds its images, then
  static constexpr int kSideBytes = 8;                   // its headers: d and the 6-bit scales (kq_split)
  static constexpr int kScVecs = 1;                      // d * (ls_j - 32)
  static_assert(kSbBytes == kImageBytes + kSideBytes && offsetof(BlockIQ4_XS, qs) == 8);

  using Regs = KqRegs;
  static Regs load(const uint8_t* g) {
    const __m512i t = _mm512_broadcast_i32x4(_mm256_castsi256_si128(
        _mm256_add_epi8(iq4_level_table(), _mm256_set1_epi8(static_cast<char>(-128)))));  // level + 128
    Regs r;
    if constexpr (kVbmi) {
#ifdef __AVX512VBMI__
      // nibble_regs' registers without its masks: bits 4-5 pick one of the table's copies.
      const __m512i a = kept(_mm512_loadu_si512(g)), b = kept(_mm512_loadu_si512(g + 64));
      r.w[0] = _mm512_permutexvar_epi8(a, t);
      r.w[1] = _mm512_permutexvar_epi8(_mm512_srli_epi16(a, 4), t);
      r.w[2] = _mm512_permutexvar_epi8(b, t);
      r.w[3] = _mm512_permutexvar_epi8(_mm512_srli_epi16(b, 4), t);
#else
      static_assert(!kVbmi, "the VBMI trait is compiled with -mavx512vbmi");
#endif
    } else {
      r = nibble_regs(g);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) r.w[k] = _mm512_shuffle_epi8(t, r.w[k]);
    }
    return r;
  }
  // d * (ls_j - 32) in lanes 2j, 2j + 1 (exact: an 11-bit d times a 6-bit scale), from the header at h.
  static void lane_scales(const uint8_t* h, __m512 (&s)[kScVecs]) {
    int64_t header;
    uint16_t d;
    std::memcpy(&header, h, 8);
    std::memcpy(&d, h, 2);
    // Field j to bits 58-63, then down with its sign: ls_j - 32 in qword j.
    const __m512i shift = _mm512_setr_epi64(42, 36, 30, 24, 18, 12, 6, 0);
    const __m512i at_top = _mm512_sllv_epi64(_mm512_set1_epi64(header), shift);
    const __m256 ls = _mm512_cvtepi64_ps(_mm512_srai_epi64(at_top, 58));
    const __m512 per_lane = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                                                  _mm512_castps256_ps512(ls));
    s[0] = _mm512_mul_ps(per_lane, _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(d))));
  }
  static void pack(const uint8_t* src, uint8_t* dst) {
    BlockIQ4_XS blk;
    std::memcpy(&blk, src, sizeof blk);
    // Element e = 32j + i: the low nibble of qs[16j + i] for i < 16, the high one of qs[16j + i - 16].
    write_nibble_image([&](int e) { return (blk.qs[16 * (e / 32) + e % 16] >> (e % 32 < 16 ? 0 : 4)) & 0xF; }, dst);
    uint64_t header = blk.d;
    for (int j = 0; j < 8; ++j) {
      const int ls = ((blk.scales_l[j / 2] >> 4 * (j % 2)) & 0xF) | ((blk.scales_h >> 2 * j) & 3) << 4;
      header |= static_cast<uint64_t>((ls - 32) & 63) << (16 + 6 * j);
    }
    std::memcpy(dst + kImageBytes, &header, 8);
  }
};

// kR x kT panel tiles for batches (2 rows share each token's activation loads: kq_tile); up to 4
// tokens run kR1 rows at a time with inline scales, 5-8 four rows at a time (kq_gemm_packed).
constexpr int kR = 2, kT = 8, kR1 = 1;

}  // namespace
}  // namespace th::cpu
