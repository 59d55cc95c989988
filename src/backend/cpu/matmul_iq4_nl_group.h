// The IQ4_NL family's group trait for act_q8_groups.h, in AVX2 (kVnni = false) and
// AVX-512 VNNI (kVnni = true); include it from matmul_iq4_nl_avx2.cpp and
// matmul_iq4_nl_avx512.cpp only.
//
// An iq4_nl block has q4_0's bytes (an f16 scale and 32 nibbles in the same order), but a
// nibble indexes a 16-entry table of levels (-127..113) instead of meaning q - 8. So the
// group is q4_0's (the same loads, rearrangement and prepared activations, from
// matmul_q4_0_group.h) with one vpshufb per register turning nibbles into levels, and the
// products are q8_0's signed ones (matmul_q8_0_group.h):
//   AVX2: |w| * sign(x, w) in vpmaddubsw (|w| <= 127: pair sums fit int16), one vpmaddwd
//   per register. Per (row, token, group): 4 vpsignb + 4 vpmaddubsw + 4 vpmaddwd + vmulps +
//   vfmadd, the same as q8_0.
//   VNNI: the table holds level + 128 (1..241, unsigned), and the prepared group's lane
//   corrections carry -128 times the activations' sum (-64 in each of a block's two lanes),
//   so 4 vpdpbusd per (row, token, group), as q4_0.
#pragma once

#include "backend/cpu/matmul_q4_0_group.h"

namespace th::cpu {
namespace {

// kVbmi (AVX-512 VBMI, matmul_iq4_nl_avx512vbmi.cpp): the packed groups' lookups are vpermb
// from a 64-entry table (the 16 levels four times), which reads only an index's low six bits,
// so the nibbles need no masking: 4 vpermb instead of 4 vpand + 4 vpshufb per 8 blocks. On
// Sapphire Rapids zmm ops issue on two ports, and those four ands made the one-token packed
// group 30 ops against q4_0's 26 (in-cache micro_bench: iq4_nl 1.4x q4_0's time).
template <bool kVnni, bool kVbmi = false>
struct IQ4_NLGroup : GroupLayout<Vec256, 160> {
  using Q4 = Q4_0Group<kVnni>;
  using V = Vec256;
  static constexpr int kBlocks = 4;
  static constexpr int kBytes = sizeof(BlockIQ4_NL);
  static_assert(sizeof(BlockIQ4_NL) == sizeof(BlockQ4_0) && offsetof(BlockIQ4_NL, qs) == offsetof(BlockQ4_0, qs));
  static constexpr int lane_block(int l) { return Q4::lane_block(l); }

  struct Regs {
    __m256i w[4];  // VNNI: level + 128; AVX2: level
    __m256i a[4];  // AVX2: |level|
  };
  static __m256i table() {
    const int k = kVnni ? 128 : 0;
    const __m128i t = _mm_setr_epi8(static_cast<char>(kIq4Values[0] + k), static_cast<char>(kIq4Values[1] + k),
                                    static_cast<char>(kIq4Values[2] + k), static_cast<char>(kIq4Values[3] + k),
                                    static_cast<char>(kIq4Values[4] + k), static_cast<char>(kIq4Values[5] + k),
                                    static_cast<char>(kIq4Values[6] + k), static_cast<char>(kIq4Values[7] + k),
                                    static_cast<char>(kIq4Values[8] + k), static_cast<char>(kIq4Values[9] + k),
                                    static_cast<char>(kIq4Values[10] + k), static_cast<char>(kIq4Values[11] + k),
                                    static_cast<char>(kIq4Values[12] + k), static_cast<char>(kIq4Values[13] + k),
                                    static_cast<char>(kIq4Values[14] + k), static_cast<char>(kIq4Values[15] + k));
    return _mm256_broadcastsi128_si256(t);
  }
  static Regs load(const uint8_t* g) { return levels(Q4::load(g)); }
  // The packed layout is q4_0's: the same nibbles, looked up after the load.
  static constexpr int kImageBytes = Q4::kImageBytes;
  static void write_image(const uint8_t* g, uint8_t* img) { Q4::write_image(g, img); }
  static Regs from_image(const uint8_t* img) { return levels(Q4::from_image(img)); }
#ifdef __AVX512F__
  static void from_image512(const uint8_t* img, __m512i (&w)[4]) {
    static_assert(kVnni, "Group8 runs the VNNI trait");
    const __m512i t = _mm512_broadcast_i32x4(_mm256_castsi256_si128(table()));
    if constexpr (kVbmi) {
#ifdef __AVX512VBMI__
      // Q4_0Group::from_image512's registers without its masks: vpermb ignores index bits
      // 6-7, and bits 4-5 (the other nibble's) select one of four copies of the table.
      const __m512i a = kept(_mm512_loadu_si512(img)), b = kept(_mm512_loadu_si512(img + 64));
      w[0] = _mm512_permutexvar_epi8(a, t);
      w[1] = _mm512_permutexvar_epi8(_mm512_srli_epi16(a, 4), t);
      w[2] = _mm512_permutexvar_epi8(b, t);
      w[3] = _mm512_permutexvar_epi8(_mm512_srli_epi16(b, 4), t);
#else
      static_assert(!kVbmi, "the VBMI trait is compiled with -mavx512vbmi");
#endif
    } else {
      Q4::from_image512(img, w);
      for (int k = 0; k < 4; ++k) w[k] = _mm512_shuffle_epi8(t, w[k]);
    }
  }
#endif
  static Regs levels(const typename Q4::Regs& nib) {
    const __m256i t = table();
    Regs r;
    for (int k = 0; k < 4; ++k) {
      r.w[k] = _mm256_shuffle_epi8(t, nib.w[k]);
      if constexpr (!kVnni) r.a[k] = _mm256_abs_epi8(r.w[k]);
    }
    return r;
  }
  static __m256i dot(const Regs& r, const uint8_t* a) {
    if constexpr (kVnni) {
      return dot_vnni(r.w, a, kCorrOffset);
    } else {
      return dot_signed_avx2(r.w, r.a, a);
    }
  }
  static __m256 dw_lanes(const uint8_t* g, const float* f16) { return Q4::dw_lanes(g, f16); }
  // q4_0's prepared group, whose lane corrections are -4 * sum (its -8 offset over two lanes);
  // VNNI needs -64 * sum (AVX2 reads none).
  static void prepare_group(const uint8_t* x, int n, uint8_t* out) {
    Q4::prepare_group(x, n, out);
    auto* corr = reinterpret_cast<int32_t*>(out + kCorrOffset);
    for (int l = 0; l < 8; ++l) corr[l] *= 16;
  }
};

}  // namespace
}  // namespace th::cpu
