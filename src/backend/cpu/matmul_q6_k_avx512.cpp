// q6_K weights x Q8_K activations, AVX-512 VNNI, on weights repacked at load:
// kquant_groups_avx512.h's super-block groups (with_q6_k_groups_avx512, act_q8k.h, adds
// their prepare hooks, pack_rows and packed gemm to the kernel). The
// file's layout keeps today's path (gemv_q6_k_avx2 for one token, PanelK6 and
// panel_gemm_k6_avx512 for more): TOKENHIVE_REPACK=0 runs exactly that.
//
// Per (row, token, super-block of 256), lane l standing for sub-block l (16 elements):
//   dot  = 4 vpdpbusd from -32 * bsums[l]   exact: sum (q - 32) x, the offset folded in
//   acc += cvt(dot) * (dw * d_a)            dw: d * s_l
// 7 ops per 256 MACs, where the panel path spends 4 vpmaddubsw + 4 vpdpwssd, a madd of the
// offsets with the block sums, a subtraction, conversion, multiply and FMA. Unpacking a
// row's super-block (3 loads, 4 shifts, 8 ands, 4 ors) is shared by the tile's tokens; dw is
// decoded once per row panel and column chunk.
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
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "backend/cpu/kquant_groups_avx512.h"

namespace th::cpu {

namespace {

struct Q6KGroup : LaneOffset<5> {  // levels + 32
  static constexpr int kSbBytes = sizeof(BlockQ6_K);  // 210
  static constexpr int kScales = offsetof(BlockQ6_K, scales), kD = offsetof(BlockQ6_K, d);
  static constexpr int kScVecs = 1;
  static_assert(kScales == 192 && kD == 208);

  using Regs = KqRegs;
  static Regs load(const uint8_t* g) {
    const __m512i a = _mm512_loadu_si512(g), b = _mm512_loadu_si512(g + 64), c = _mm512_loadu_si512(g + 128);
    const __m512i m = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);
    auto join = [&](__m512i lo, __m512i hi) {
      return _mm512_or_si512(_mm512_and_si512(lo, m), _mm512_and_si512(hi, top));
    };
    return {{join(a, _mm512_slli_epi16(c, 4)), join(_mm512_srli_epi16(a, 4), _mm512_slli_epi16(c, 2)), join(b, c),
             join(_mm512_srli_epi16(b, 4), _mm512_srli_epi16(c, 2))}};
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

// kR x kT tiles for batches; up to kT tokens run kR1 rows at a time with inline scales.
constexpr int kR = 1, kT = 8, kR1 = 1;

}  // namespace

MatmulKernel with_q6_k_groups_avx512(MatmulKernel file_layout) {
  return with_kq_groups<Q6KGroup, kR, kT, kR1>(file_layout);
}

}  // namespace th::cpu
