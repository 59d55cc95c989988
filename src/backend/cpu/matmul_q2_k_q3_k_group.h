// The q2_K and q3_K group traits (q2_K and q3_K weights x Q8_K activations, AVX-512 VNNI, on
// weights repacked at load) for kquant_groups_avx512.h's super-block driver; include it from
// matmul_q2_k_q3_k_avx512.cpp (two-bit fields by shifts and ands) and
// matmul_q2_k_q3_k_avx512gfni.cpp (by GFNI) only. Their with_q*_k_groups_avx512[gfni] (act_q8k.h)
// add the prepare hooks, pack_rows and packed gemm to the kernels. The file's layout keeps the
// AVX2 path (gemv_q*_k_avx2 for one token, the panels for more): TOKENHIVE_REPACK=0 runs that.
//
// Why: a one-token q2_K super-block (84 bytes) cost about 65 ymm ops on the file's layout
// (per 32-element chunk a shift, a mask, vpmaddubsw, a vpshufb for the scales, vpmaddwd and
// an add), about 11 GB/s of compute per core here, barely above a core's share of the memory
// bandwidth; the decode ran at 35-45% of the bandwidth ceiling (BENCHMARKS.md, session 6).
// Here lane l of a zmm register stands for sub-block l (elements 16l .. 16l + 15, each with
// its own scale), register k holding elements 16l + 4k .. 16l + 4k + 3 in it, so per
// (row, token, super-block):
//   q2_K: one 64-byte load, 3 shifts and 4 ands (or an and and 3 vgf2p8affineqb); dot = 4 vpdpbusd (levels 0..3 x s8)
//         acc += cvt(dot) * (d s_l * d_a);  acc -= (dmin m_l) * (d_a bsums[l])   (q4_K's step)
//   q3_K: the same two bits, plus the third one from four 64-bit masks (kmovq + a masked
//         byte add of 4); GFNI: register 0 and 1 and two bits of 2 from one 64-byte source,
//         register 3 and the third bit of 2 from the nibbles of a 32-byte one: an and, 4
//         vgf2p8affineqb and an or (12 ops -> 6; session 16's 7, from three 32-byte sources
//         of nibbles, in cache 1.12x and decode 1.07x paired, BENCHMARKS "Session 16"; this one
//         a further 1.07x in cache, session 17);
//         dot = 4 vpdpbusd from -4 * bsums[l] (the -4 offset folded in)
//         acc += cvt(dot) * (d (s_l - 32) * d_a)
// plus the lane scales (one 16-byte load, widen, convert, multiply): about 25 zmm ops per
// super-block, each row's super-block decoded once for the tile's tokens. One token takes
// its super-blocks in pairs instead (row1): the two lanes' dots packed to int16 meet their
// scales (and q2_K's mins) in one vpmaddwd each, about 10 ops of scaling a pair where the step
// takes 15 a super-block (decode of the 1.1B q2_K on the 2-vCPU Zen 5 VM, where it is
// compute-bound: +11%, paired A/B); what the pair needs of the token (q2_K: bsums and d_a,
// q3_K: d_a) is laid out once per token (pair_aux: in cache 1.05x). q3_K's pairs gained
// nothing while its third bit took 12 ops (session 11); with the GFNI layout they do: in
// cache 1.09x (session 17).
//
// Packed super-blocks keep the file's size, whole (row1 reads both of a pair in one sweep):
//   q2_K (84):  [0, 64) the levels' image (byte 4l + i: element 16l + 4k + i at bits 2k),
//               [64, 80) the file's scales, [80, 84) d, dmin.
//   q3_K (110): [0, 64) the low two bits' image as q2_K's, [64, 96) mask k (8 bytes, k = 0..3:
//               bit 4l + i is the third bit of element 16l + 4k + i), [96, 108) the file's
//               scales (the GFNI variant: s_l - 32 as 6-bit fields, lane_scales), [108, 110) d.
//               The GFNI variant's [0, 96): byte j (j = 4l + i) of [0, 64) holds the levels of
//               elements 16l + i (register 0) in bits 0-2, 16l + 4 + i (register 1) in bits 3-5
//               and the low two bits of 16l + 8 + i's (register 2) in bits 6-7; byte j % 32 of
//               [64, 96), in its low nibble for j < 32 and its high one for j >= 32, the level
//               of 16l + 12 + i (register 3) in bits 0-2 and register 2's third bit in bit 3
//               (Q3KGroup::pack, load).
//
// Rounding: the integer sums are exact in both paths; this path scales each lane's sum, the
// AVX2 path each block's scaled integer sum, so packed results are not bit-identical to
// gemm; both stay within a few ulps of sum |w x| (the kquant tests check 2e-5 * sum |w x|).
// GCC 12's AVX-512 headers warn on _mm512_undefined_*() once inlined (GCC bug 105593).
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "backend/cpu/kquant_avx2.h"
#include "backend/cpu/kquant_groups_avx512.h"

namespace th::cpu {
namespace {

// The low two bits of both (kquant_groups_avx512.h's two-bit image, from the file's qs).
void write_low_bits(const uint8_t* qs, uint8_t* img) {
  write_two_bit_image([&](int e) { return two_bits_at(qs, e); }, img);
}

// The four two-bit registers of a packed super-block (two_bit_regs). kGfni
// (matmul_q2_k_q3_k_avx512gfni.cpp): registers 1-3 by one vgf2p8affineqb each, whose bit
// matrix moves bits 2k and 2k + 1 of every byte to bits 0 and 1 and clears the rest, where the
// plain form takes a shift and an and (3 shifts and 4 ands a super-block). On the Zen 5 VM of
// session 14 the shifts were the one-token loop's bottleneck: the one-token q2_K matmul in
// cache ran 1.39x as fast with them gone (BENCHMARKS.md, "Session 14"). Register 0 is an and
// in both: Zen 5 runs ands on 4 pipes, affines on 2 (1.02x in cache, session 17).
template <bool kGfni>
inline KqRegs low_bits(const uint8_t* img) {
  if constexpr (kGfni) {
#ifdef __GFNI__
    const __m512i a = kept(_mm512_loadu_si512(img));
    KqRegs r;
    r.w[0] = _mm512_and_si512(a, _mm512_set1_epi8(3));
#pragma GCC unroll 3
    for (int k = 1; k < 4; ++k) {  // matrix row 7 (output bit 0) picks bit 2k, row 6 (bit 1) bit 2k + 1
      const __m512i pick = _mm512_set1_epi64(int64_t{1} << (56 + 2 * k) | int64_t{2} << (48 + 2 * k));
      r.w[k] = _mm512_gf2p8affine_epi64_epi8(a, pick, 0);
    }
    return r;
#else
    static_assert(!kGfni, "the GFNI trait is compiled with -mgfni");
#endif
  } else {
    return two_bit_regs(img);
  }
}

template <bool kGfni>
struct Q2KGroup : LaneMins {
  static constexpr int kSbBytes = sizeof(BlockQ2_K);  // 84
  static constexpr int kScales = 64, kD = 80;          // in a packed super-block
  static constexpr int kScVecs = 2;                    // d * s_l, dmin * m_l
  static_assert(kSbBytes == kD + 4);
  using Regs = KqRegs;

  static Regs load(const uint8_t* g) { return low_bits<kGfni>(g); }
  // d * s_l and dmin * m_l in lane l (exact: an 11-bit d times a 4-bit scale).
  static void lane_scales(const uint8_t* g, __m512 (&s)[kScVecs]) {
    const __m512i z = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kScales)));
    uint32_t dd;
    std::memcpy(&dd, g + kD, 4);
    const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dd)));  // d, dmin
    s[0] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(z, _mm512_set1_epi32(0xF))), _mm512_broadcastss_ps(dm));
    s[1] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(z, 4)), _mm512_broadcastss_ps(_mm_movehdup_ps(dm)));
  }
  static void pack(const uint8_t* src, uint8_t* dst) {
    write_low_bits(src + offsetof(BlockQ2_K, qs), dst);
    std::memcpy(dst + kScales, src + offsetof(BlockQ2_K, scales), 16);
    std::memcpy(dst + kD, src + offsetof(BlockQ2_K, d), 4);  // d, dmin
  }

  // Per pair of super-blocks (2j, 2j + 1), after the token's Q8_K row (kq_prepare): both
  // super-blocks' bsums in vpackssdw's order (128-bit block k: bsums[4k .. 4k + 3] of the
  // first, then of the second, int16) and d_a0, d_a0, d_a1, d_a1, for row1.
  static constexpr int kPairBytes = 80;
  static void pair_aux(const uint8_t* blk0, const uint8_t* blk1, uint8_t* out) {
    // Qword k of each block's bsums (bsums[4k .. 4k + 3]) to qwords 2k (first) and 2k + 1.
    const __m512i both = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk0 + offsetof(BlockQ8_K, bsums)))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk1 + offsetof(BlockQ8_K, bsums))), 1);
    _mm512_storeu_si512(out, _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 4, 1, 5, 2, 6, 3, 7), both));
    float da[4];
    std::memcpy(&da[0], blk0, 4);
    std::memcpy(&da[2], blk1, 4);
    da[1] = da[0];
    da[3] = da[2];
    std::memcpy(out + 64, da, 16);
  }

  // Both super-blocks' 16 scale bytes as int16 in vpackssdw's order (128-bit block k: bytes
  // 4k .. 4k + 3 of s0, then of s1). kGfni (VBMI): s0 and s1 side by side (one insert), then
  // one masked vpermb, where the plain form takes two unpacks, the insert and a zero
  // extension (one-token q2_K in cache 1.03x, decode 1.02x paired on the Zen 5 VM:
  // BENCHMARKS "Session 15").
  static __m512i pair_scales(__m128i s0, __m128i s1) {
    if constexpr (kGfni) {
#ifdef __AVX512VBMI__
      const __m512i both = _mm512_castsi256_si512(_mm256_set_m128i(s1, s0));
      const __m512i idx = _mm512_set_epi16(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8,
                                           23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
      return _mm512_maskz_permutexvar_epi8(0x5555555555555555ull, idx, both);
#else
      static_assert(!kGfni, "the GFNI trait is compiled with -mavx512vbmi");
#endif
    }
    return _mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_unpackhi_epi32(s0, s1), _mm_unpacklo_epi32(s0, s1)));
  }

  // One token's dot product with one packed row of nb super-blocks (a: the token's prepared
  // activations), in 16 lanes to be summed, super-blocks two at a time. The lanes' exact
  // integer dots of both (int16: |dot| <= 16 * 3 * 128) are packed into one register, so that
  // one vpmaddwd applies both super-blocks' 32 scales and another their mins to the bsums
  // (pair_aux's), and one conversion and one FMA each scale the lot by d * d_a (dmin * d_a).
  static __m512 row1(const uint8_t* w, int64_t nb, const uint8_t* a) {
    const __m512i low4 = _mm512_set1_epi16(0x0F);
    // d0 d_a0, dmin0 d_a0, d1 d_a1, dmin1 d_a1 -> each 128-bit block's 4 lanes' d (dmin) d_a.
    const __m512i d_lanes = _mm512_set4_epi32(2, 2, 0, 0), m_lanes = _mm512_set4_epi32(3, 3, 1, 1);
    __m512 acc_d = _mm512_setzero_ps(), acc_m = _mm512_setzero_ps();
    auto pair = [&](const uint8_t* g0, const uint8_t* g1, const uint8_t* a0, const uint8_t* pa) [[gnu::always_inline]] {
      const __m512i d0 = dot_lanes(load(g0), a0, _mm512_setzero_si512());
      const __m512i d1 = dot_lanes(load(g1), a0 + kKActBytes, _mm512_setzero_si512());
      // 128-bit block k of each vector below: lanes 4k..4k+3 of super-block b, then of b + 1
      // (vpackssdw's order), as int16.
      const __m512i dots = _mm512_packs_epi32(d0, d1);
      const __m128i s0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g0 + kScales));
      const __m128i s1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g1 + kScales));
      const __m512i sm = pair_scales(s0, s1);
      // int32 lane 4k + j: super-block b for j < 2, b + 1 for j >= 2.
      const __m512i sums = _mm512_madd_epi16(dots, _mm512_and_si512(sm, low4));
      const __m512i mins = _mm512_madd_epi16(_mm512_srli_epi16(sm, 4), _mm512_loadu_si512(pa));
      uint32_t dd0, dd1;
      std::memcpy(&dd0, g0 + kD, 4);
      std::memcpy(&dd1, g1 + kD, 4);
      const __m512 x = _mm512_zextps128_ps512(
          _mm_mul_ps(_mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128(static_cast<int>(dd0)), static_cast<int>(dd1), 1)),
                     _mm_loadu_ps(reinterpret_cast<const float*>(pa + 64))));
      acc_d = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_permutexvar_ps(d_lanes, x), acc_d);
      acc_m = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_permutexvar_ps(m_lanes, x), acc_m);
    };
    return kq_row_in_pairs<Q2KGroup>(w, nb, a, pair, [&] { return _mm512_sub_ps(acc_d, acc_m); });
  }
};

template <bool kGfni>
struct Q3KGroup : LaneOffset<2> {  // levels + 4
  static constexpr int kSbBytes = sizeof(BlockQ3_K);  // 110
  static constexpr int kMasks = 64, kScales = offsetof(BlockQ3_K, scales), kD = offsetof(BlockQ3_K, d);
  static constexpr int kScVecs = 1;  // d * (s_l - 32)
  static_assert(kScales == 96 && kD == 108 && kSbBytes == kD + 2);
  using Regs = KqRegs;

  static Regs load(const uint8_t* g) {
    if constexpr (kGfni) {
#ifdef __GFNI__
      // pack's layout: byte j of [0, 64) holds register 0's level in bits 0-2, register 1's in
      // bits 3-5, register 2's low two bits in bits 6-7; byte j % 32 of [64, 96), in both
      // 256-bit halves here, holds in its low nibble (j < 32) or high one (j >= 32) register
      // 3's level in bits 0-2 and register 2's third bit in bit 3. Matrix byte 7 - b picks the
      // input bits of output bit b (per qword: the lower four qwords read the low nibble of
      // the second source, the upper four the high one).
      const __m512i lo = kept(_mm512_loadu_si512(g));
      const __m512i hi = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 64)));
      constexpr int64_t kReg1 = int64_t{8} << 56 | int64_t{16} << 48 | int64_t{32} << 40;  // bits 3-5
      constexpr int64_t kReg2Low = int64_t{64} << 56 | int64_t{128} << 48;                  // bits 6-7
      constexpr int64_t kReg2TopLo = int64_t{8} << 40, kReg2TopHi = int64_t{128} << 40;     // bit 3 or 7
      Regs r;
      r.w[0] = _mm512_and_si512(lo, _mm512_set1_epi8(7));
      r.w[1] = _mm512_gf2p8affine_epi64_epi8(lo, _mm512_set1_epi64(kReg1), 0);
      r.w[2] = _mm512_or_si512(
          _mm512_gf2p8affine_epi64_epi8(lo, _mm512_set1_epi64(kReg2Low), 0),
          _mm512_gf2p8affine_epi64_epi8(hi, by_half(kReg2TopLo, kReg2TopHi), 0));
      r.w[3] = _mm512_gf2p8affine_epi64_epi8(hi, by_half(kLevelLo, kLevelHi), 0);
      return r;
#else
      static_assert(!kGfni, "the GFNI trait is compiled with -mgfni");
#endif
    } else {
      Regs r = two_bit_regs(g);
      const __m512i four = _mm512_set1_epi8(4);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        uint64_t bits;
        std::memcpy(&bits, g + kMasks + 8 * k, 8);
        r.w[k] = _mm512_mask_add_epi8(r.w[k], _cvtu64_mask64(bits), r.w[k], four);
      }
      return r;
    }
  }
  // Output bits 0-2 from input bits 0-2 (kLevelLo) or 4-6 (kLevelHi).
  static constexpr int64_t kLevelLo = int64_t{1} << 56 | int64_t{2} << 48 | int64_t{4} << 40;
  static constexpr int64_t kLevelHi = kLevelLo << 4;
  // A matrix operand: m_lo in the lower four qwords, m_hi in the upper four.
  static __m512i by_half(int64_t m_lo, int64_t m_hi) { return _mm512_set_epi64(m_hi, m_hi, m_hi, m_hi, m_lo, m_lo, m_lo, m_lo); }
  // d * (s_l - 32) in lane l (exact: an 11-bit d times a 6-bit scale). kGfni: the packed
  // scales are 6-bit fields (pack), which one vpmultishiftqb moves to bits 2-7 of byte l
  // (window 6l - 2 of its qword, the two bits below masked off): 4 (s_l - 32) as int8, the 4
  // folded into d / 4 (exact), in 4 ops where the file's packing takes 11 (q3_scales).
  static void lane_scales(const uint8_t* g, __m512 (&s)[kScVecs]) {
    if constexpr (kGfni) {
#ifdef __AVX512VBMI__
      const __m128i windows = _mm_setr_epi8(14, 20, 26, 32, 38, 44, 50, 56, 62, 4, 10, 16, 22, 28, 34, 40);
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kScales - 2));  // qwords: [94, 110)
      const __m128i q = _mm_and_si128(_mm_multishift_epi64_epi8(windows, x), _mm_set1_epi8(static_cast<char>(0xFC)));
      const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
      s[0] = _mm512_mul_ps(sc, _mm512_set1_ps(kquant_avx2::load_f16(g + kD) * 0.25f));
#else
      static_assert(!kGfni, "the GFNI trait is compiled with -mavx512vbmi");
#endif
    } else {
      const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(kquant_avx2::q3_scales(g + kScales)));
      s[0] = _mm512_mul_ps(sc, _mm512_set1_ps(kquant_avx2::load_f16(g + kD)));
    }
  }
  static void pack(const uint8_t* src, uint8_t* dst) {
    const uint8_t* hm = src + offsetof(BlockQ3_K, hmask);
    // Element e's third bit: bit e / 32 of hmask[e % 32].
    auto level = [&](int e) { return two_bits_at(src + offsetof(BlockQ3_K, qs), e) | ((hm[e % 32] >> (e / 32)) & 1) << 2; };
    if constexpr (kGfni) {
      // load's layout (register k's byte j = 4l + i: element 16l + 4k + i).
      std::memset(dst, 0, 96);
      for (int j = 0; j < 64; ++j) {
        int lv[4];
        for (int k = 0; k < 4; ++k) lv[k] = level(16 * (j / 4) + 4 * k + j % 4);
        dst[j] = static_cast<uint8_t>(lv[0] | lv[1] << 3 | (lv[2] & 3) << 6);
        const int nibble = lv[3] | (lv[2] >> 2) << 3;
        dst[64 + j % 32] = static_cast<uint8_t>(dst[64 + j % 32] | nibble << (4 * (j / 32)));
      }
    } else {
      write_low_bits(src + offsetof(BlockQ3_K, qs), dst);
      for (int k = 0; k < 4; ++k) {  // mask k: bit 4l + i is the third bit of element 16l + 4k + i
        uint64_t bits = 0;
        for (int j = 0; j < 64; ++j) bits |= static_cast<uint64_t>(level(16 * (j / 4) + 4 * k + j % 4) >> 2) << j;
        std::memcpy(dst + kMasks + 8 * k, &bits, 8);
      }
    }
    if constexpr (kGfni) {
      // s_l - 32 as 6-bit fields: l = 0..7 at bits 6l of bytes [96, 102), l = 8..15 of [102, 108).
      alignas(16) int8_t sc[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(sc), kquant_avx2::q3_scales(src + kScales));
      uint64_t half[2] = {0, 0};
      for (int l = 0; l < 16; ++l) half[l / 8] |= static_cast<uint64_t>(sc[l] & 63) << (6 * (l % 8));
      std::memcpy(dst + kScales, &half[0], 6);
      std::memcpy(dst + kScales + 6, &half[1], 6);
      std::memcpy(dst + kD, src + kD, 2);
    } else {
      std::memcpy(dst + kScales, src + kScales, kSbBytes - kScales);  // scales, d
    }
  }
  // One token's super-blocks go in pairs too (row1, as Q2KGroup's): per pair of Q8_K blocks,
  // d_a0 / 1024 and d_a1 / 1024 (f32; the 1024 of pair_scales, exact).
  static constexpr int kPairBytes = 8;
  static void pair_aux(const uint8_t* blk0, const uint8_t* blk1, uint8_t* out) {
    float da[2];
    std::memcpy(&da[0], blk0, 4);
    std::memcpy(&da[1], blk1, 4);
    da[0] *= 1.0f / 1024;
    da[1] *= 1.0f / 1024;
    std::memcpy(out, da, 8);
  }

  // Both packed super-blocks' scales as int16 1024 (s_l - 32) in vpackssdw's order (128-bit
  // block k: lanes 4k .. 4k + 3 of g0, then of g1). kGfni: both super-blocks' 6-bit fields by
  // one vpmultishiftqb (as lane_scales: 4 (s_l - 32) in a byte), then one vpermb into the high
  // byte of each int16 (4 ops); the plain form decodes the file's packing (q3_scales) twice.
  static __m512i pair_scales(const uint8_t* g0, const uint8_t* g1) {
    if constexpr (kGfni) {
#ifdef __AVX512VBMI__
      const __m256i windows = _mm256_setr_epi8(14, 20, 26, 32, 38, 44, 50, 56, 62, 4, 10, 16, 22, 28, 34, 40, 14, 20,
                                               26, 32, 38, 44, 50, 56, 62, 4, 10, 16, 22, 28, 34, 40);
      // Int16 8k + j (128-bit block k): super-block j / 4's lane 4k + j % 4, multishift byte
      // 16 (j / 4) + 4k + j % 4, into the int16's high byte.
      const __m512i to_words = _mm512_set_epi8(
          31, 0, 30, 0, 29, 0, 28, 0, 15, 0, 14, 0, 13, 0, 12, 0, 27, 0, 26, 0, 25, 0, 24, 0, 11, 0, 10, 0, 9, 0, 8, 0,
          23, 0, 22, 0, 21, 0, 20, 0, 7, 0, 6, 0, 5, 0, 4, 0, 19, 0, 18, 0, 17, 0, 16, 0, 3, 0, 2, 0, 1, 0, 0, 0);
      const __m256i fields = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g0 + kScales - 2))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(g1 + kScales - 2)), 1);
      const __m512i q = _mm512_castsi256_si512(_mm256_multishift_epi64_epi8(windows, fields));
      return _mm512_and_si512(_mm512_maskz_permutexvar_epi8(0xAAAAAAAAAAAAAAAAull, to_words, q),
                              _mm512_set1_epi16(static_cast<int16_t>(0xFC00)));
#else
      static_assert(!kGfni, "the GFNI trait is compiled with -mavx512vbmi");
#endif
    }
    const __m128i s0 = kquant_avx2::q3_scales(g0 + kScales), s1 = kquant_avx2::q3_scales(g1 + kScales);
    return _mm512_slli_epi16(
        _mm512_cvtepi8_epi16(_mm256_set_m128i(_mm_unpackhi_epi32(s0, s1), _mm_unpacklo_epi32(s0, s1))), 10);
  }

  // One token's dot product with one packed row of nb super-blocks in 16 lanes to be summed,
  // super-blocks two at a time as Q2KGroup::row1: both super-blocks' lane dots (from -4 *
  // bsums, |dot| <= 16 * 4 * 128) packed to int16 meet their 32 scales (pair_scales) in one
  // vpmaddwd (|sum| <= 2^29), then one conversion and one FMA scale the lot by d * d_a / 1024:
  // about 9 ops of scaling a pair where lane_scales and the step take 11 a super-block.
  static __m512 row1(const uint8_t* w, int64_t nb, const uint8_t* a) {
    const __m512i d_lanes = _mm512_set4_epi32(1, 1, 0, 0);
    __m512 acc = _mm512_setzero_ps();
    auto pair = [&](const uint8_t* g0, const uint8_t* g1, const uint8_t* a0, const uint8_t* pa) [[gnu::always_inline]] {
      const __m512i d0 = dot_lanes(load(g0), a0, _mm512_loadu_si512(a0 + kAuxOffset));
      const __m512i d1 = dot_lanes(load(g1), a0 + kKActBytes, _mm512_loadu_si512(a0 + kKActBytes + kAuxOffset));
      const __m512i sums = _mm512_madd_epi16(_mm512_packs_epi32(d0, d1), pair_scales(g0, g1));
      uint16_t h0, h1;
      std::memcpy(&h0, g0 + kD, 2);
      std::memcpy(&h1, g1 + kD, 2);
      const __m128 dd = _mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(h0), h1, 1));
      // pa is 4-byte aligned only (Q8_K blocks are 292 bytes): movq, not a double's load.
      const __m128 x = _mm_mul_ps(dd, _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(pa))));
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_permutexvar_ps(d_lanes, _mm512_zextps128_ps512(x)), acc);
    };
    return kq_row_in_pairs<Q3KGroup>(w, nb, a, pair, [&] { return acc; });
  }
};

// kR x kT panel tiles for batches (2 rows share each token's activation loads: kq_tile); up to 4
// tokens run kR1 rows at a time with inline scales, 5-8 four rows at a time (kq_gemm_packed).
constexpr int kR = 2, kT = 8, kR1 = 1;

}  // namespace
}  // namespace th::cpu
