// q4_K weights x Q8_K activations, AVX-512 VNNI, on weights repacked at load:
// kquant_groups_avx512.h's super-block groups (with_q4_k_groups_avx512, act_q8k.h, adds
// their prepare hooks, pack_rows and packed gemm to the kernel). The
// file's layout keeps today's path (gemv_q4_k_avx2 for one token, PanelK4 and
// panel_gemm_k4_avx512 for more): TOKENHIVE_REPACK=0 runs exactly that.
//
// The panel path spends per (row, token, super-block of 256) 4 vpmaddubsw + 4 vpdpwssd
// and an epilogue of a d * d_a multiply, two FMAs, a conversion and the mins' loads: about
// 12-13 zmm ops per 256 MACs, and unpacks every row to bytes once per matmul. Here, per
// (row, token, super-block):
//   dot  = 4 vpdpbusd                lane l: elements 16l .. 16l + 15, exact
//   acc += cvt(dot) * (dw * d_a)     dw: d * sc_j in lanes 2j, 2j + 1
//   acc -= mn * abs                  mn: dmin * m_j, abs: d_a * the lane's 16-element sum
// 8 ops per 256 MACs; unpacking a row's super-block (2 loads, 2 shifts, 4 ands) is shared
// by the tile's tokens, and dw, mn are decoded once per row panel and column chunk.
// Measured (micro_bench BM_BackendMatmul/q4_K, one thread, against TOKENHIVE_REPACK=0, busy
// machine, medians of 3 alternations): 1.3-2.0x at 32-128 tokens on the 1.1B shapes, 1.4-1.9x
// at one token; bench model 1.1B q4_K prefill 512 1.53x, batch-32 decode 1.36x (BENCHMARKS.md,
// "Q4_K repacked", also for the batch-1 decode question).
//
// Packed super-block (144 bytes, the file's size): the nibble image (128 bytes: registers
// a then b, w0 = a & 15, w1 = a >> 4, w2 = b & 15, w3 = b >> 4, byte 4l + i of w_k being
// element 16l + 4k + i), and the file's 16 header bytes (d, dmin, scales) unchanged. A packed
// row holds its images, then its headers (kquant_groups_avx512.h's kq_split).
//
// Rounding: the integer sums are exact in both paths; the float steps differ (this path
// scales each lane's sum, the panel path the block's scaled integer sum, which can exceed
// 2^24, and one token on the file's layout runs gemv_q4_k_avx2's lanes), so packed
// results are not bit-identical to gemm; both stay within a few ulps of sum |w x| (the
// kquant tests check 2e-5 * sum |w x| against the exact product and against gemm).
// GCC 12's AVX-512 headers warn on _mm512_undefined_*() once inlined (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "backend/cpu/kquant_groups_avx512.h"

namespace th::cpu {

namespace {

struct Q4KGroup : LaneMins {
  static constexpr int kSbBytes = sizeof(BlockQ4_K);  // 144
  static constexpr int kImageBytes = 128;             // the nibbles; a packed row holds its images, then
  static constexpr int kSideBytes = 16;               // its headers: d, dmin, scales (kq_split)
  static constexpr int kScVecs = 2;                   // dw, mn
  static_assert(kSbBytes == kImageBytes + kSideBytes);

  using Regs = KqRegs;
  static Regs load(const uint8_t* g) { return nibble_regs(g); }
  // dw (d * sc_j) and mn (dmin * m_j) in lanes 2j, 2j + 1, from the header at h: the 6-bit
  // unpacking of kquant_avx2.h's scales_and_mins on words u0 u1 u2 at dwords 1..3.
  static void lane_scales(const uint8_t* h, __m512 (&s)[kScVecs]) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h));  // d|dmin u0 u1 u2
    const __m128i v = _mm_shuffle_epi32(x, _MM_SHUFFLE(3, 2, 3, 1));                      // u0 u2 u1 u2
    const __m128i w = _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 2, 1, 1));                      // u0 u0 u1 u1
    const __m128i lo = _mm_and_si128(v, _mm_set1_epi32(0x3f3f3f3f));
    const __m128i nib = _mm_and_si128(_mm_srlv_epi32(v, _mm_setr_epi32(0, 0, 0, 4)), _mm_set1_epi32(0x0f0f0f0f));
    const __m128i top = _mm_and_si128(_mm_srli_epi32(w, 2), _mm_set1_epi32(0x30303030));
    const __m128i sm = _mm_blend_epi32(lo, _mm_or_si128(nib, top), 0b1010);  // sc0..7, m0..7 as bytes
    const __m512 v16 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sm));
    const __m512 dm = _mm512_castps128_ps512(_mm_cvtph_ps(x));  // d, dmin
    const __m512 coef =
        _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), dm);
    const __m512 scaled = _mm512_mul_ps(v16, coef);  // exact: an 11-bit d times a 6-bit scale
    s[0] = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), scaled);
    s[1] = _mm512_permutexvar_ps(_mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15),
                                 scaled);
  }
  static void pack(const uint8_t* src, uint8_t* dst) {
    const uint8_t* qs = src + offsetof(BlockQ4_K, qs);
    // Level of element e: byte 32 (e / 64) + e % 32 of qs, the low nibble for e % 64 < 32.
    write_nibble_image([&](int e) { return (qs[32 * (e / 64) + e % 32] >> (e % 64 < 32 ? 0 : 4)) & 0xF; }, dst);
    std::memcpy(dst + kImageBytes, src, 16);  // d, dmin, scales
  }
};

// kR x kT panel tiles for batches (2 rows share each token's activation loads: kq_tile); up to 4
// tokens run kR1 rows at a time with inline scales, 5-8 four rows at a time (kq_gemm_packed).
constexpr int kR = 2, kT = 8, kR1 = 1;

}  // namespace

MatmulKernel with_q4_k_groups_avx512(MatmulKernel file_layout) {
  return with_kq_groups<Q4KGroup, kR, kT, kR1>(file_layout);
}

}  // namespace th::cpu
