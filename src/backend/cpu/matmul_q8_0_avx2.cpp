// Q8_0 weights x Q8_0 activations, AVX2 (driver and the why of 4-block groups
// in act_q8_avx2.h).
//
// vpmaddubsw multiplies unsigned by signed bytes, so, as in ggml, the weight's
// sign moves onto the activation: |w| * sign(x, w); |w| <= 127 keeps each pair
// sum <= 2 * 127 * 127 < 32767. Those int16 sums can not be added across
// blocks without overflow, so each block's goes through its own vpmaddwd and
// the int32 results add up (vpaddd); the group still shares one vcvtdq2ps,
// vmulps and FMA. Per (row, token, group of 4 blocks): 4 vpsignb + 4
// vpmaddubsw + 4 vpmaddwd + vmulps + vfmadd = 14 multiply-pipe ops, against
// 20-24 for a per-block kernel. |w| and the rearrangement (4 loads, 4
// vpunpck*dq, 4 vpunpck*qdq, 4 vpabsb) are shared by the tile's tokens.
#include "backend/cpu/act_q8_avx2.h"

namespace th::cpu {

namespace {

struct Q8_0Group {
  static constexpr int kBytes = sizeof(BlockQ8_0);
  static constexpr int kDxOffset = 128;
  static constexpr int kActBytes = 160;
  // Register k holds, in 32-bit lane l, elements 4k + 16 * (l / 4) .. + 3 of block l % 4.
  static constexpr int lane_block(int l) { return l % 4; }

  struct Regs {
    __m256i w[4];
    __m256i a[4];  // |w|
  };
  static Regs load(const uint8_t* g) {
    const __m256i b0 = loadu(g + 2), b1 = loadu(g + kBytes + 2), b2 = loadu(g + 2 * kBytes + 2),
                  b3 = loadu(g + 3 * kBytes + 2);
    const __m256i t0 = _mm256_unpacklo_epi32(b0, b1), t1 = _mm256_unpackhi_epi32(b0, b1);
    const __m256i t2 = _mm256_unpacklo_epi32(b2, b3), t3 = _mm256_unpackhi_epi32(b2, b3);
    Regs r;
    r.w[0] = _mm256_unpacklo_epi64(t0, t2);  // elements 0-3 | 16-19 of b0..b3
    r.w[1] = _mm256_unpackhi_epi64(t0, t2);  // 4-7 | 20-23
    r.w[2] = _mm256_unpacklo_epi64(t1, t3);  // 8-11 | 24-27
    r.w[3] = _mm256_unpackhi_epi64(t1, t3);  // 12-15 | 28-31
    for (int k = 0; k < 4; ++k) r.a[k] = _mm256_abs_epi8(r.w[k]);
    return r;
  }
  static __m256i dot(const Regs& r, const uint8_t* a) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s[4];
    for (int k = 0; k < 4; ++k)
      s[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(r.a[k], _mm256_sign_epi8(loadu(a + 32 * k), r.w[k])), ones);
    return _mm256_add_epi32(_mm256_add_epi32(s[0], s[1]), _mm256_add_epi32(s[2], s[3]));
  }
  static __m256 dw_lanes(const uint8_t* g, const float* f16) {
    const __m128 d = _mm_setr_ps(f16[load_u16(g)], f16[load_u16(g + kBytes)], f16[load_u16(g + 2 * kBytes)],
                                 f16[load_u16(g + 3 * kBytes)]);
    return _mm256_set_m128(d, d);
  }
  static void prepare_group(const uint8_t* x, int n, uint8_t* out) {
    std::memset(out, 0, kDxOffset);
    for (int b = 0; b < n; ++b) {
      const uint8_t* qs = x + b * kQ8Bytes + 2;
      for (int k = 0; k < 4; ++k) {
        std::memcpy(out + 32 * k + 4 * b, qs + 4 * k, 4);
        std::memcpy(out + 32 * k + 16 + 4 * b, qs + 16 + 4 * k, 4);
      }
    }
  }
};

}  // namespace

extern constinit const MatmulKernel kMatmulQ8_0Avx2 = {
    DType::Q8_0, DType::Q8_0, Isa::Avx2, convert_act_q8_0_avx2, gemm_groups<Q8_0Group, 1, 6, 1>,
    prepared_row_bytes<Q8_0Group>, prepare_row<Q8_0Group>, gemm_groups_prepared<Q8_0Group, 1, 6, 1>};

}  // namespace th::cpu
