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

struct Q6KGroup {
  static constexpr int kSbBytes = sizeof(BlockQ6_K);  // 210
  static constexpr int kScales = offsetof(BlockQ6_K, scales), kD = offsetof(BlockQ6_K, d);
  static constexpr int kScVecs = 1;
  static_assert(kScales == 192 && kD == 208);

  struct Regs {
    __m512i w[4];
  };
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
  static __m512 step(const Regs& regs, const __m512 (&s)[kScVecs], const uint8_t* a, __m512 acc) {
    const __m512i dot = dot_lanes(regs, a, _mm512_loadu_si512(a + kAuxOffset));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(s[0], load_da(a)), acc);
  }
  // The offset's correction: -32 times each lane's 16-element sum, as int32.
  static void aux(const uint8_t* blk, uint8_t* out) {
    const __m512i bs = _mm512_cvtepi16_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + offsetof(BlockQ8_K, bsums))));
    _mm512_storeu_si512(out, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(bs, 5)));
  }
  static void pack(const uint8_t* src, uint8_t* dst) {
    const uint8_t* ql = src + offsetof(BlockQ6_K, ql);
    const uint8_t* qh = src + offsetof(BlockQ6_K, qh);
    // Element e: half h = e / 128, quarter g = e % 128 / 32, l = e % 32: its low nibble in
    // ql[64h + 32 (g % 2) + l] (the high nibble for g >= 2), its top bits at 2g of qh[32h + l].
    auto lo = [&](int e) {
      const int h = e / 128, g = e % 128 / 32, l = e % 32;
      return (ql[64 * h + 32 * (g % 2) + l] >> (g >= 2 ? 4 : 0)) & 0xF;
    };
    auto hi = [&](int e) { return (qh[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3; };
    for (int l = 0; l < 16; ++l)
      for (int i = 0; i < 4; ++i) {
        const int e = 16 * l + i;
        dst[4 * l + i] = static_cast<uint8_t>(lo(e) | lo(e + 4) << 4);
        dst[64 + 4 * l + i] = static_cast<uint8_t>(lo(e + 8) | lo(e + 12) << 4);
        dst[128 + 4 * l + i] = static_cast<uint8_t>(hi(e) | hi(e + 4) << 2 | hi(e + 8) << 4 | hi(e + 12) << 6);
      }
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
