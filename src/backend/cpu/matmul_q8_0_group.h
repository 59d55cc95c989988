// The Q8_0 family's group trait for act_q8_groups.h, in AVX2 (kVnni = false)
// and AVX-512 VNNI (kVnni = true); include it from matmul_q8_0_avx2.cpp and
// matmul_q8_0_avx512.cpp only.
//
// AVX2: vpmaddubsw multiplies unsigned by signed bytes, so, as in ggml, the
// weight's sign moves onto the activation: |w| * sign(x, w); |w| <= 127 keeps
// each pair sum <= 2 * 127 * 127 < 32767. Those int16 sums can not be added
// across blocks without overflow, so each block's goes through its own
// vpmaddwd and the int32 results add up (vpaddd); the group still shares one
// vcvtdq2ps, vmulps and FMA. Per (row, token, group of 4 blocks): 4 vpsignb + 4
// vpmaddubsw + 4 vpmaddwd + vmulps + vfmadd = 14 multiply-pipe ops, against
// 20-24 for a per-block kernel. |w| and the rearrangement (4 loads, 4
// vpunpck*dq, 4 vpunpck*qdq, 4 vpabsb) are shared by the tile's tokens.
//
// VNNI: weights enter vpdpbusd as w ^ 0x80 = w + 128 (unsigned), and the
// prepared group carries -128 times each lane's activation sum, where the
// accumulation starts: 4 vpdpbusd per (row, token, group), no int16 limit.
#pragma once

#include "backend/cpu/act_q8_groups.h"

namespace th::cpu {
namespace {

// X0..X3, then (VNNI only) the int32 corrections per lane, then the f32 lane scales.
template <bool kVnni>
struct Q8_0Group : GroupLayout<Vec256, kVnni ? 160 : 128> {
  using GroupLayout<Vec256, kVnni ? 160 : 128>::kCorrOffset;
  using GroupLayout<Vec256, kVnni ? 160 : 128>::kDxOffset;
  using V = Vec256;
  static constexpr int kBlocks = 4;
  static constexpr int kBytes = sizeof(BlockQ8_0);
  // Register k holds, in 32-bit lane l, elements 4k + 16 * (l / 4) .. + 3 of block l % 4.
  static constexpr int lane_block(int l) { return l % 4; }

  struct Regs {
    __m256i w[4];  // VNNI: w + 128
    __m256i a[4];  // AVX2: |w|
  };
  // The group's bytes in the registers' order (VNNI: + 128, the unsigned operand).
  static void image(const uint8_t* g, __m256i (&w)[4]) {
    const __m256i b0 = loadu(g + 2), b1 = loadu(g + kBytes + 2), b2 = loadu(g + 2 * kBytes + 2),
                  b3 = loadu(g + 3 * kBytes + 2);
    const __m256i t0 = _mm256_unpacklo_epi32(b0, b1), t1 = _mm256_unpackhi_epi32(b0, b1);
    const __m256i t2 = _mm256_unpacklo_epi32(b2, b3), t3 = _mm256_unpackhi_epi32(b2, b3);
    w[0] = _mm256_unpacklo_epi64(t0, t2);  // elements 0-3 | 16-19 of b0..b3
    w[1] = _mm256_unpackhi_epi64(t0, t2);  // 4-7 | 20-23
    w[2] = _mm256_unpacklo_epi64(t1, t3);  // 8-11 | 24-27
    w[3] = _mm256_unpackhi_epi64(t1, t3);  // 12-15 | 28-31
    if constexpr (kVnni)
      for (int k = 0; k < 4; ++k) w[k] = _mm256_xor_si256(w[k], _mm256_set1_epi8(-128));
  }
  static Regs finish(Regs r) {
    if constexpr (!kVnni)
      for (int k = 0; k < 4; ++k) r.a[k] = _mm256_abs_epi8(r.w[k]);
    return r;
  }
  static Regs load(const uint8_t* g) {
    Regs r;
    image(g, r.w);
    return finish(r);
  }
  // The packed layout (act_q8_groups.h, Packed): the four registers as image() leaves them;
  // load is then four loads (VNNI), where the file's layout costs eight unpacks and four xors more.
  static constexpr int kImageBytes = 128;
  static void write_image(const uint8_t* g, uint8_t* img) {
    __m256i w[4];
    image(g, w);
    for (int k = 0; k < 4; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(img + 32 * k), w[k]);
  }
  static Regs from_image(const uint8_t* img) {
    Regs r;
    for (int k = 0; k < 4; ++k) r.w[k] = loadu(img + 32 * k);
    return finish(r);
  }
#ifdef __AVX512F__
  static void from_image512(const uint8_t* img, __m512i (&w)[4]) {
    static_assert(kVnni, "Group8 runs the VNNI trait");
    for (int k = 0; k < 4; ++k) w[k] = kept(_mm512_loadu_si512(img + 64 * k));
  }
#endif
  static __m256i dot(const Regs& r, const uint8_t* a) {
    if constexpr (kVnni) {
      return dot_vnni(r.w, a, kCorrOffset);
    } else {
      return dot_signed_avx2(r.w, r.a, a);
    }
  }
  static __m256 dw_lanes(const uint8_t* g, const float* f16) {
    const __m128 d = _mm_setr_ps(f16[load_u16(g)], f16[load_u16(g + kBytes)], f16[load_u16(g + 2 * kBytes)],
                                 f16[load_u16(g + 3 * kBytes)]);
    return _mm256_set_m128(d, d);
  }
  static void prepare_group(const uint8_t* x, int n, uint8_t* out) {
    std::memset(out, 0, kDxOffset);
    auto* corr = reinterpret_cast<int32_t*>(out + kCorrOffset);
    for (int b = 0; b < n; ++b) {
      const auto* qs = reinterpret_cast<const int8_t*>(x + b * kQ8Bytes + 2);
      for (int k = 0; k < 4; ++k) {
        std::memcpy(out + 32 * k + 4 * b, qs + 4 * k, 4);
        std::memcpy(out + 32 * k + 16 + 4 * b, qs + 16 + 4 * k, 4);
      }
      if constexpr (kVnni) {
        // Lane b holds elements 0-15 of block b, lane b + 4 elements 16-31.
        for (int half = 0; half < 2; ++half) {
          int32_t sum = 0;
          for (int i = 0; i < kQK / 2; ++i) sum += qs[16 * half + i];
          corr[b + 4 * half] = -128 * sum;
        }
      }
    }
  }
};

}  // namespace
}  // namespace th::cpu
