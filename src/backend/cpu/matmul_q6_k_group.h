// The q6_K group trait (q6_K weights x Q8_K activations, AVX-512 VNNI, on weights repacked at
// load) for kquant_groups_avx512.h's super-block driver; include it from
// matmul_q6_k_avx512.cpp (fields by shifts, ands and ors) and matmul_q6_k_avx512gfni.cpp (by
// GFNI) only. Their with_q6_k_groups_avx512[gfni] (act_q8k.h) add the prepare hooks, pack_rows
// and packed gemm to the kernel. The file's layout keeps its own path (gemv_q6_k_avx2 for one
// token, PanelK6 and panel_gemm_k6_avx512 for more): TOKENHIVE_REPACK=0 runs exactly that.
//
// Per (row, token, super-block of 256), lane l standing for sub-block l (16 elements):
//   dot  = 4 vpdpbusd from -32 * bsums[l]   exact: sum (q - 32) x, the offset folded in
//   acc += cvt(dot) * (dw * d_a)            dw: d * s_l
// 7 ops per 256 MACs, where the panel path spends 4 vpmaddubsw + 4 vpdpwssd, a madd of the
// offsets with the block sums, a subtraction, conversion, multiply and FMA. Unpacking a
// row's super-block (3 loads, 5 shifts, 8 ands, 4 ors; with GFNI 5 vgf2p8affineqb, an and,
// 2 ors and 2 vpternlogq) is shared by the tile's tokens; dw is decoded once per row panel and
// column chunk. One token runs these groups too, in both variants (the plain one ran the file's
// layout through gemv_q6_k_avx2 until session 21; with each register loaded once, `kept`, its
// groups are 1.5-2.8x that gemv on the Zen 5 VM: BENCHMARKS "Session 21").
//
// Packed super-block (210 bytes, the file's size, so rows keep their offsets): registers
// a, b (low nibbles: w0 = a & 15, w1 = a >> 4, w2 = b & 15, w3 = b >> 4) and c (the top
// two bits of w_k at bits 2k, 2k + 1), byte 4l + i of w_k being element 16l + 4k + i; then
// the file's scales and d unchanged (at their own offsets, 192 and 208).
//
// Rounding: the integer sums are exact in both paths; this path scales each lane's sum,
// the panel path the block's scaled integer sum, so packed results are not bit-identical to
// gemm; both stay within a few ulps of sum |w x| (the kquant tests check 2e-5 * sum |w x|).
// GCC 12's AVX-512 headers warn on _mm512_undefined_*() once inlined (GCC bug 105593).
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "backend/cpu/kquant_groups_avx512.h"

namespace th::cpu {
namespace {

template <bool kGfni>
struct Q6KGroup : LaneOffset<5> {  // levels + 32
  static constexpr int kSbBytes = sizeof(BlockQ6_K);  // 210
  static constexpr int kScales = offsetof(BlockQ6_K, scales), kD = offsetof(BlockQ6_K, d);
  static constexpr int kScVecs = 1;
  static_assert(kScales == 192 && kD == 208);

  using Regs = KqRegs;
  static Regs load(const uint8_t* g) {
    const __m512i a = kept(_mm512_loadu_si512(g)), b = kept(_mm512_loadu_si512(g + 64)),
                  c = kept(_mm512_loadu_si512(g + 128));
    const __m512i m = _mm512_set1_epi8(0x0F);
    if constexpr (kGfni) {
#ifdef __GFNI__
      // Bit matrices (vgf2p8affineqb: byte 7 - i of the qword picks output bit i's inputs): a
      // byte's high nibble to its low one, and bits 2k, 2k + 1 of c to bits 4 and 5.
      auto gf = [](__m512i x, int64_t bits) { return _mm512_gf2p8affine_epi64_epi8(x, _mm512_set1_epi64(bits), 0); };
      constexpr int64_t kHigh = int64_t{0x10} << 56 | int64_t{0x20} << 48 | int64_t{0x40} << 40 | int64_t{0x80} << 32;
      auto top = [](int k) { return int64_t{1} << (24 + 2 * k) | int64_t{2} << (16 + 2 * k); };
      constexpr int kLowOrTop = 0xEA;  // vpternlogq: (x & m) | t
      return {{_mm512_ternarylogic_epi64(a, m, gf(c, top(0)), kLowOrTop), _mm512_or_si512(gf(a, kHigh), gf(c, top(1))),
               _mm512_ternarylogic_epi64(b, m, _mm512_and_si512(c, _mm512_set1_epi8(0x30)), kLowOrTop),
               _mm512_or_si512(gf(b, kHigh), gf(c, top(3)))}};
#else
      static_assert(!kGfni, "the GFNI trait is compiled with -mgfni");
#endif
    } else {
      const __m512i top = _mm512_set1_epi8(0x30);
      auto join = [&](__m512i lo, __m512i hi) {
        return _mm512_or_si512(_mm512_and_si512(lo, m), _mm512_and_si512(hi, top));
      };
      return {{join(a, _mm512_slli_epi16(c, 4)), join(_mm512_srli_epi16(a, 4), _mm512_slli_epi16(c, 2)), join(b, c),
               join(_mm512_srli_epi16(b, 4), _mm512_srli_epi16(c, 2))}};
    }
  }
  // d * s_l in lane l (exact: an 11-bit d times an 8-bit scale).
  static void lane_scales(const uint8_t* g, __m512 (&s)[kScVecs]) {
    uint16_t h;
    std::memcpy(&h, g + kD, 2);
    const __m512 sc = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kScales))));
    s[0] = _mm512_mul_ps(sc, _mm512_set1_ps(_cvtsh_ss(h)));
  }
  static void pack(const uint8_t* src, uint8_t* dst) {
    const uint8_t* ql = src + offsetof(BlockQ6_K, ql);
    const uint8_t* qh = src + offsetof(BlockQ6_K, qh);
    // Element e: half h = e / 128, quarter g = e % 128 / 32, l = e % 32: its low nibble in
    // ql[64h + 32 (g % 2) + l] (the high nibble for g >= 2), its top bits at 2g of qh[32h + l].
    write_nibble_image(
        [&](int e) {
          const int h = e / 128, g = e % 128 / 32, l = e % 32;
          return (ql[64 * h + 32 * (g % 2) + l] >> (g >= 2 ? 4 : 0)) & 0xF;
        },
        dst);
    write_two_bit_image([&](int e) { return two_bits_at(qh, e); }, dst + 128);
    std::memcpy(dst + kScales, src + kScales, kSbBytes - kScales);  // scales, d
  }
};

// kR x kT panel tiles for batches (2 rows share each token's activation loads: kq_tile); up to 4
// tokens run kR1 rows at a time with inline scales, 5-8 four rows at a time (kq_gemm_packed).
constexpr int kR = 2, kT = 8, kR1 = 1;

}  // namespace
}  // namespace th::cpu
