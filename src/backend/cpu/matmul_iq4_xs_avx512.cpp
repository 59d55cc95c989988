// IQ4_XS weights x Q8_K activations, AVX-512 VNNI: on the file's layout the AVX2 tile with
// vpdpwssd for the scale multiply and add (matmul_iq4_xs_tile.h); on weights repacked at load
// kquant_groups_avx512.h's super-block groups (with_iq4_xs_groups_avx512, act_q8k.h, adds
// their prepare hooks, pack_rows and packed gemm to the kernel).
//
// The file's-layout tile spends per 32-element sub-block and token about 10 ymm ops (a
// 16-byte load, shift, insert, mask, the level lookup, vpabsb, the scale's vpshufb, then
// vpsignb, vpmaddubsw, vpdpwssd): 80 per super-block of 136 bytes, about 10 GB/s of compute
// per core here. Packed, lane l of a zmm register stands for elements 16l .. 16l + 15 (half
// of sub-block l / 2), register k holding elements 16l + 4k .. 16l + 4k + 3, as q4_K's
// (matmul_q4_k_avx512.cpp), with IQ4_NL's unsigned table (matmul_iq4_nl_group.h): levels
// + 128 (1..241), so vpdpbusd multiplies them as u8 and the prepared activations carry
// -128 * bsums[l] per lane to start from. Per (row, token, super-block):
//   2 loads, 2 shifts, 4 ands, 4 vpshufb (the 16 levels)      the row's, shared by the tile
//   dot  = 4 vpdpbusd from -128 * bsums[l]                     exact: sum level * x
//   acc += cvt(dot) * (d (ls_j - 32) * d_a)                   lanes 2j, 2j + 1
//
// Packed super-block (136 bytes, the file's size): registers a, b (w0 = a & 15, w1 = a >> 4,
// w2 = b & 15, w3 = b >> 4, byte 4l + i of w_k the nibble of element 16l + 4k + i), then a
// header of 64 bits: d (fp16) in bits 0-15, ls_j - 32 (6-bit two's complement) in bits 16 + 6j
// .. 21 + 6j. One broadcast qword, a shift left per lane and an arithmetic shift right give
// the eight scales sign-extended in 64-bit lanes (9 ops a super-block to d * (ls_j - 32) in
// its lanes, where the file's 6-bit split, scales_h and scales_l, took 19; BENCHMARKS
// "Session 21").
//
// Rounding: integer sums exact in both paths; this path scales each lane's sum, the tile each
// super-block's scaled sum, so packed results are within the kquant tests' 2e-5 * sum |w x|
// of gemm, not bit for bit.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "backend/cpu/kquant_groups_avx512.h"
#include "backend/cpu/matmul_iq4_xs_tile.h"

namespace th::cpu {

void gemm_iq4_xs_avx512(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                        const uint8_t* act, size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  gemm_iq4_xs<true>(w, w_row_bytes, cols, r0, r1, act, act_row_bytes, n_tokens, y, y_stride);
}

namespace {

struct IQ4XSGroup : LaneOffset<7> {  // levels + 128
  static constexpr int kSbBytes = sizeof(BlockIQ4_XS);  // 136
  static constexpr int kHeader = 128;                    // d, scales_h, scales_l in a packed super-block
  static constexpr int kScVecs = 1;                      // d * (ls_j - 32)
  static_assert(kSbBytes == kHeader + 8 && offsetof(BlockIQ4_XS, qs) == 8);

  using Regs = KqRegs;
  static Regs load(const uint8_t* g) {
    const __m512i t = _mm512_broadcast_i32x4(_mm256_castsi256_si128(
        _mm256_add_epi8(iq4_level_table(), _mm256_set1_epi8(static_cast<char>(-128)))));  // level + 128
    Regs r = nibble_regs(g);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) r.w[k] = _mm512_shuffle_epi8(t, r.w[k]);
    return r;
  }
  // d * (ls_j - 32) in lanes 2j, 2j + 1 (exact: an 11-bit d times a 6-bit scale).
  static void lane_scales(const uint8_t* g, __m512 (&s)[kScVecs]) {
    int64_t header;
    uint16_t d;
    std::memcpy(&header, g + kHeader, 8);
    std::memcpy(&d, g + kHeader, 2);
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
    std::memcpy(dst + kHeader, &header, 8);
  }
};

// kR x kT tiles for batches; up to kT tokens run kR1 rows at a time with inline scales.
constexpr int kR = 1, kT = 8, kR1 = 1;

}  // namespace

MatmulKernel with_iq4_xs_groups_avx512(MatmulKernel file_layout) {
  return with_kq_groups<IQ4XSGroup, kR, kT, kR1>(file_layout);
}

}  // namespace th::cpu
