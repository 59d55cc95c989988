// The IQ4_XS x Q8_K gemm in AVX2 (kVnni = false) and AVX-512 VNNI on 256-bit registers
// (kVnni = true); include it from matmul_iq4_xs_avx2.cpp and matmul_iq4_xs_avx512.cpp only
// (everything is in an unnamed namespace).
//
// Per 32-element sub-block of a row: one 16-byte load of its nibbles, the two nibble halves
// side by side (element order), one vpshufb from the 16 levels, vpabsb; then per token
// vpsignb (the level's sign moved onto the activation: pair sums |w| * 127 * 2 <= 32258 fit
// int16), vpmaddubsw, and the multiply by the sub-block's scale (ls - 32) with vpmaddwd +
// vpaddd (VNNI: one vpdpwssd). Each super-block ends with one FMA per token by d_w * d_a.
// The decoded levels are shared by a tile of up to 4 tokens, so more tokens do not redo
// the decoding (one token: the plain streaming dot product, memory-bound).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/act_q8k.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {
namespace {

constexpr size_t kIq4XsQ8KBytes = sizeof(BlockQ8_K);

inline float iq4xs_hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i iq4_level_table() {
  __m128i t;
  std::memcpy(&t, kIq4Values, 16);
  return _mm256_broadcastsi128_si256(t);
}

// The eight sub-block scales ls - 32 of a block as int16, in both 128-bit halves, from the
// block's first 8 bytes (d, scales_h, scales_l) in vector registers: int16 lane j gets
// byte j / 2 of scales_l, shifted by a multiply so that its nibble j % 2 lands at bits 4-7,
// and scales_h, shifted by a multiply so that bits 2j, 2j + 1 land at bits 14-15. (The
// scalar decode took about 40 instructions per block, a third of a one-token block's; pdep
// would take 2 but runs in microcode, hundreds of cycles, on AMD before Zen 3.)
inline __m256i iq4xs_scales(const uint8_t* blk) {
  static_assert(offsetof(BlockIQ4_XS, scales_h) == 2 && offsetof(BlockIQ4_XS, scales_l) == 4);
  const __m128i head = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk));
  const __m128i l = _mm_shuffle_epi8(head, _mm_setr_epi8(4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1));
  const __m128i lo = _mm_srli_epi16(_mm_mullo_epi16(l, _mm_setr_epi16(16, 1, 16, 1, 16, 1, 16, 1)), 4);
  const __m128i h = _mm_shuffle_epi8(head, _mm_setr_epi8(2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3));
  const __m128i hi = _mm_srli_epi16(_mm_mullo_epi16(h, _mm_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6,
                                                                     1 << 4, 1 << 2, 1)),
                                    10);  // bits 2j, 2j + 1 at bits 4-5
  const __m128i ls = _mm_or_si128(_mm_and_si128(lo, _mm_set1_epi16(0xF)), _mm_and_si128(hi, _mm_set1_epi16(0x30)));
  return _mm256_broadcastsi128_si256(_mm_sub_epi16(ls, _mm_set1_epi16(32)));
}

template <bool kVnni, int T>
void iq4xs_tile(const uint8_t* row, int64_t nb, const uint8_t* const* act, float* out) {
  const __m256i table = iq4_level_table();
  const __m256i m4 = _mm256_set1_epi8(0xF);
  __m256 facc[T];
  for (int t = 0; t < T; ++t) facc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = row + b * sizeof(BlockIQ4_XS);
    const __m256i sc = iq4xs_scales(wb);
    __m256i acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + offsetof(BlockIQ4_XS, qs) + 16 * j));
      const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), m4);
      const __m256i w = _mm256_shuffle_epi8(table, nib);
      const __m256i aw = _mm256_abs_epi8(w);
      const __m256i s = _mm256_shuffle_epi8(sc, _mm256_set1_epi16(static_cast<short>(0x0100 + 0x0202 * j)));
      for (int t = 0; t < T; ++t) {
        const __m256i a = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(act[t] + b * kIq4XsQ8KBytes + offsetof(BlockQ8_K, qs) + 32 * j));
        const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(a, w));
        if constexpr (kVnni)
          acc[t] = _mm256_dpwssd_epi32(acc[t], p, s);
        else
          acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(p, s));
      }
    }
    uint16_t dh;
    std::memcpy(&dh, wb, 2);
    const float dw = _cvtsh_ss(dh);
    for (int t = 0; t < T; ++t) {
      float da;
      std::memcpy(&da, act[t] + b * kIq4XsQ8KBytes, 4);
      facc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * da), _mm256_cvtepi32_ps(acc[t]), facc[t]);
    }
  }
  for (int t = 0; t < T; ++t) out[t] = iq4xs_hsum(facc[t]);
}

// MatmulKernel::gemm: tiles of up to 4 tokens (their activations stay in L1 across rows),
// each row streamed once per tile.
template <bool kVnni>
void gemm_iq4_xs(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                 size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  constexpr int kTokens = 4;
  const int64_t nb = cols / kQKK;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokens) {
    const int nt = static_cast<int>(std::min<int64_t>(kTokens, n_tokens - t0));
    const uint8_t* a[kTokens];
    for (int t = 0; t < nt; ++t) a[t] = act + (t0 + t) * act_row_bytes;
    float out[kTokens];
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = w + r * w_row_bytes;
      switch (nt) {
        case 1: iq4xs_tile<kVnni, 1>(row, nb, a, out); break;
        case 2: iq4xs_tile<kVnni, 2>(row, nb, a, out); break;
        case 3: iq4xs_tile<kVnni, 3>(row, nb, a, out); break;
        default: iq4xs_tile<kVnni, 4>(row, nb, a, out); break;
      }
      for (int t = 0; t < nt; ++t) y[(t0 + t) * y_stride + r] = out[t];
    }
  }
}

}  // namespace
}  // namespace th::cpu
