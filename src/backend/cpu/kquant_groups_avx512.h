// The driver of the K-quant kernels on weights repacked at load, AVX-512 VNNI
// (matmul_q4_k_avx512.cpp, matmul_q6_k_avx512.cpp): one super-block of 256 weights is one
// group, in the style of act_q8_groups.h's Group8. Include it from those *_avx512.cpp files
// (and *_avx512gfni.cpp ones) only: everything is in an unnamed namespace, so no SIMD code can
// stand in for a baseline function of the same name at link time.
//
// Int32 lane l of a zmm register stands for elements 16l .. 16l + 15 of the super-block
// (q6_K's sub-block l, half of q4_K's sub-block l / 2), register k holding elements
// 16l + 4k .. 16l + 4k + 3 in it, so four vpdpbusd (u8 levels x s8 activations) leave each
// lane's exact integer dot product, and one conversion, one multiply by the lane scales
// times d_a and one FMA (plus one for q4_K's mins) serve all 256 multiply-adds. The lane
// scales are decoded once per (row panel, column chunk) and reused by every token tile, as
// the group driver's dwf (a few tokens decode them per row instead).
//
// Prepared activations (the kernels' prepare hook, once per matmul), per token: per
// super-block kKGroupActBytes bytes: X0..X3 (X_k[4l + i] = q8[16l + 4k + i]), 64 bytes
// of the family's per-lane term at kAuxOffset (q4_K: d_a * bsums[l] as f32; q6_K: -32 *
// bsums[l] as int32), d_a in 16 lanes at kDaOffset; then the token's Q8_K row itself (from
// kKGroupActBytes * nb on), which the file's-layout path reads; then, for a family with
// pair_aux (q2_K's and q3_K's row1), kPairBytes per pair of super-blocks.
//
// A family supplies a trait K:
//   kSbBytes                the super-block's bytes (the file's: a packed row keeps its size)
//   kScVecs                 lane-scale vectors per super-block (q4_K: d*sc and dmin*m; q6_K: d*s)
//   Regs load(g)            the four u8 registers from a packed super-block
//   lane_scales(g, sc)      its lane scales
//   kImageBytes, kSideBytes optional (IQ4_XS, q4_K): pack's kSbBytes = the level image (a multiple
//                           of 64) then the side record (d, scales); a packed row then holds its
//                           nb images, then its nb side records (kq_split), so that on the
//                           backend's 64-byte row strides every image load is one cache line;
//                           load(g) reads an image, lane_scales(g, sc) a side record
//   step(regs, sc, a, acc)  acc plus the super-block's product with prepared super-block a
//   aux(blk, out)           the per-lane term from a Q8_K block
//                           (step and aux: LaneMins or LaneOffset below, as a base)
//   pack(src, dst)          a file super-block -> its packed form
//   row1(w, nb, a)          optional: one token's dot with one packed row, as 16 lanes to sum
//                           (q2_K, q3_K: super-blocks in pairs, kq_row_in_pairs); kq_gemm_packed then runs it for one token
//   kPairBytes, pair_aux(blk0, blk1, out)
//                           optional: per pair of Q8_K blocks, what row1 reads after the Q8_K row
#pragma once

#include <immintrin.h>

#include <cstring>

#include "backend/cpu/act_q8.h"
#include "backend/cpu/act_q8k.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/tile_table.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {
namespace {

constexpr int kKActBytes = kKGroupActBytes;       // 384 per prepared super-block
constexpr int kAuxOffset = 256, kDaOffset = 320;    // in a prepared super-block
constexpr size_t kQ8KBlock = sizeof(BlockQ8_K);

// The exact integer dot products of a super-block's lanes, starting from start.
template <class Regs>
inline __m512i dot_lanes(const Regs& regs, const uint8_t* a, __m512i start) {
  __m512i dot = _mm512_dpbusd_epi32(start, regs.w[0], _mm512_loadu_si512(a));
#pragma GCC unroll 4
  for (int k = 1; k < 4; ++k) dot = _mm512_dpbusd_epi32(dot, regs.w[k], _mm512_loadu_si512(a + 64 * k));
  return dot;
}

inline __m512 load_da(const uint8_t* a) { return _mm512_loadu_ps(reinterpret_cast<const float*>(a + kDaOffset)); }

// A packed super-block's levels as the four u8 registers (K::load's result).
struct KqRegs {
  __m512i w[4];
};

// The images the families pack their levels into, from level(e) of element e (0..255):
// nibbles (128 bytes): byte 4l + i holds elements 16l + i and 16l + 4 + i (low, high nibble),
// byte 64 + 4l + i elements 16l + 8 + i and 16l + 12 + i; nibble_regs reads it back.
template <class Level>
void write_nibble_image(Level level, uint8_t* dst) {
  for (int l = 0; l < 16; ++l)
    for (int i = 0; i < 4; ++i) {
      const int e = 16 * l + i;
      dst[4 * l + i] = static_cast<uint8_t>(level(e) | level(e + 4) << 4);
      dst[64 + 4 * l + i] = static_cast<uint8_t>(level(e + 8) | level(e + 12) << 4);
    }
}
inline KqRegs nibble_regs(const uint8_t* img) {
  const __m512i a = kept(_mm512_loadu_si512(img)), b = kept(_mm512_loadu_si512(img + 64));
  const __m512i m = _mm512_set1_epi8(0x0F);
  return {{_mm512_and_si512(a, m), _mm512_and_si512(_mm512_srli_epi16(a, 4), m), _mm512_and_si512(b, m),
           _mm512_and_si512(_mm512_srli_epi16(b, 4), m)}};
}
// Two bits (64 bytes): byte 4l + i holds element 16l + 4k + i at bits 2k, so (image >> 2k) & 3
// is register k; two_bit_regs reads it back.
template <class Level>
void write_two_bit_image(Level level, uint8_t* img) {
  for (int l = 0; l < 16; ++l)
    for (int i = 0; i < 4; ++i) {
      const int e = 16 * l + i;
      img[4 * l + i] = static_cast<uint8_t>(level(e) | level(e + 4) << 2 | level(e + 8) << 4 | level(e + 12) << 6);
    }
}
inline KqRegs two_bit_regs(const uint8_t* img) {
  const __m512i a = kept(_mm512_loadu_si512(img)), m = _mm512_set1_epi8(3);
  return {{_mm512_and_si512(a, m), _mm512_and_si512(_mm512_srli_epi16(a, 2), m),
           _mm512_and_si512(_mm512_srli_epi16(a, 4), m), _mm512_and_si512(_mm512_srli_epi16(a, 6), m)}};
}
// The file layout of q2_K's and q3_K's low two bits and of q6_K's high two: element e = 128h +
// 32j + l at bits 2j of q[32h + l].
inline int two_bits_at(const uint8_t* q, int e) { return (q[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3; }

// The two ways a family's levels meet the activations' per-lane sums (its step and aux):
// LaneMins (q4_K, q2_K): unsigned levels and per-lane mins, lane scales s[0] = d * sc and
// s[1] = dmin * m, aux = d_a times each lane's 16-element sum (f32):
//   acc += dot * s[0] * d_a - s[1] * aux.
struct LaneMins {
  // step = finish(dot_lanes(regs, a, dot_start(a)), s, a, acc); the panel tiles share a
  // token's activation loads between rows, so they run the three apart.
  static __m512i dot_start(const uint8_t*) { return _mm512_setzero_si512(); }
  template <int N>
  static __m512 finish(__m512i dot, const __m512 (&s)[N], const uint8_t* a, __m512 acc) {
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(s[0], load_da(a)), acc);
    return _mm512_fnmadd_ps(s[1], _mm512_loadu_ps(reinterpret_cast<const float*>(a + kAuxOffset)), acc);
  }
  template <class Regs, int N>
  static __m512 step(const Regs& regs, const __m512 (&s)[N], const uint8_t* a, __m512 acc) {
    return finish(dot_lanes(regs, a, dot_start(a)), s, a, acc);
  }
  static void aux(const uint8_t* blk, uint8_t* out) {
    float da;
    std::memcpy(&da, blk, 4);
    const __m512 s = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + offsetof(BlockQ8_K, bsums)))));
    _mm512_storeu_ps(reinterpret_cast<float*>(out), _mm512_mul_ps(s, _mm512_set1_ps(da)));
  }
};
// LaneOffset<kLog2> (q6_K 5, q3_K 2, IQ4_XS 7): levels stored as level + 2^kLog2 (unsigned
// for vpdpbusd), so each lane's dot starts from aux = -2^kLog2 times its 16-element sum
// (int32); lane scales s[0] = d * scale: acc += dot * s[0] * d_a.
template <int kLog2>
struct LaneOffset {
  static __m512i dot_start(const uint8_t* a) { return _mm512_loadu_si512(a + kAuxOffset); }
  template <int N>
  static __m512 finish(__m512i dot, const __m512 (&s)[N], const uint8_t* a, __m512 acc) {
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(s[0], load_da(a)), acc);
  }
  template <class Regs, int N>
  static __m512 step(const Regs& regs, const __m512 (&s)[N], const uint8_t* a, __m512 acc) {
    return finish(dot_lanes(regs, a, dot_start(a)), s, a, acc);
  }
  static void aux(const uint8_t* blk, uint8_t* out) {
    const __m512i bs = _mm512_cvtepi16_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + offsetof(BlockQ8_K, bsums))));
    _mm512_storeu_si512(out, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(bs, kLog2)));
  }
};

// A packed row of a split family (K::kSideBytes): its nb level images, then its nb side
// records, then the stride's padding. Streamed from memory (one token), a 136-byte super-block
// on the file's layout spans three cache lines and both its 64-byte loads straddle two: the
// split layout's images are whole lines (a 1.1B IQ4_XS decode: BENCHMARKS "Session 22").
template <class K>
constexpr bool kq_split() {
  return requires { K::kSideBytes; };
}
template <class K>
constexpr int kq_image_bytes() {
  if constexpr (kq_split<K>()) {
    static_assert(K::kImageBytes % 64 == 0 && K::kImageBytes + K::kSideBytes == K::kSbBytes);
    return K::kImageBytes;
  }
  return K::kSbBytes;
}
template <class K>
constexpr int kq_side_bytes() {
  if constexpr (kq_split<K>()) return K::kSideBytes;
  return 0;
}

// K::kPairBytes per pair of super-blocks after the Q8_K row where K has pair_aux (0 otherwise).
template <class K>
constexpr size_t kq_pair_bytes() {
  if constexpr (requires { K::pair_aux(nullptr, nullptr, nullptr); }) return K::kPairBytes;
  return 0;
}

template <class K>
size_t kq_prepared_row_bytes(int64_t cols) {
  const int64_t nb = cols / kQKK;
  return (static_cast<size_t>(nb) * (kKActBytes + kQ8KBlock) + static_cast<size_t>(nb / 2) * kq_pair_bytes<K>() + 63) /
         64 * 64;
}

// One token's Q8_K row -> its prepared form at dst.
template <class K>
void kq_prepare(const uint8_t* act, int64_t cols, uint8_t* dst) {
  const int64_t nb = cols / kQKK;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = act + b * kQ8KBlock;
    uint8_t* out = dst + b * kKActBytes;
    const uint8_t* qs = blk + offsetof(BlockQ8_K, qs);
    // X_k's dword l is dword 4l + k of qs: dword 4(l % 4) + k of its 64-byte part l / 4, so
    // lanes 0-7 from parts 0 and 1, lanes 8-15 from parts 2 and 3 (two vpermt2d and a blend
    // per k, where there were 64 4-byte copies: a 1.1B decode's preparation 1.81 -> 1.71 us).
    __m512i part[4];
    for (int m = 0; m < 4; ++m) part[m] = _mm512_loadu_si512(qs + 64 * m);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i idx = _mm512_add_epi32(_mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28),
                                           _mm512_set1_epi32(k));
      const __m512i low = _mm512_permutex2var_epi32(part[0], idx, part[1]);
      const __m512i high = _mm512_permutex2var_epi32(part[2], idx, part[3]);
      _mm512_storeu_si512(out + 64 * k, _mm512_mask_blend_epi32(0xFF00, low, high));
    }
    float da;
    std::memcpy(&da, blk, 4);
    K::aux(blk, out + kAuxOffset);
    _mm512_storeu_ps(reinterpret_cast<float*>(out + kDaOffset), _mm512_set1_ps(da));
  }
  std::memcpy(dst + nb * kKActBytes, act, static_cast<size_t>(nb) * kQ8KBlock);
  if constexpr (kq_pair_bytes<K>() > 0)
    for (int64_t j = 0; j < nb / 2; ++j)
      K::pair_aux(act + 2 * j * kQ8KBlock, act + (2 * j + 1) * kQ8KBlock,
                  dst + nb * (kKActBytes + kQ8KBlock) + j * kq_pair_bytes<K>());
}

// Rows [r0, r1) of W in the file's layout -> the packed layout at out, rows out_row_bytes apart
// (the padding zeroed).
template <class K>
void kq_pack_rows(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, uint8_t* out,
                  size_t out_row_bytes) {
  constexpr int kImg = kq_image_bytes<K>(), kSide = kq_side_bytes<K>();
  const int64_t nb = cols / kQKK;
  for (int64_t r = r0; r < r1; ++r) {
    uint8_t* row = out + r * out_row_bytes;
    for (int64_t b = 0; b < nb; ++b) {
      alignas(64) uint8_t sb[K::kSbBytes];
      K::pack(w + r * w_row_bytes + b * K::kSbBytes, sb);
      std::memcpy(row + b * kImg, sb, kImg);
      if constexpr (kSide > 0) std::memcpy(row + nb * kImg + b * kSide, sb + kImg, kSide);
    }
    std::memset(row + w_row_bytes, 0, out_row_bytes - w_row_bytes);
  }
}

// One token's dot product with one packed row of nb super-blocks, two at a time (a family's
// row1): pair(g0, g1, a0, pa) for each pair (g0, g1: its packed super-blocks; a0: the first's
// prepared activations; pa: its pair_aux bytes), with the pair's lines prefetched
// kStreamPrefetchBytes ahead and the pointers stepped (the loop's scalar work: 5 ops a pair,
// where indexing from the super-block number took 13); then finish() (the pairs' 16 lanes)
// plus, for an odd nb, the last super-block's step.
template <class K, class Pair, class Finish>
[[gnu::always_inline]] inline __m512 kq_row_in_pairs(const uint8_t* w, int64_t nb, const uint8_t* a, Pair&& pair,
                                                     Finish&& finish) {
  constexpr int kLines = (2 * K::kSbBytes + 63) / 64;
  const uint8_t* g0 = w;
  const uint8_t* a0 = a;
  const uint8_t* pa = a + nb * (kKActBytes + kQ8KBlock);
  for (int64_t j = nb / 2; j > 0; --j, g0 += 2 * K::kSbBytes, a0 += 2 * kKActBytes, pa += K::kPairBytes) {
#pragma GCC unroll 4
    for (int line = 0; line < kLines; ++line)
      prefetch_stream(g0 + 64 * line);
    pair(g0, g0 + K::kSbBytes, a0, pa);
  }
  __m512 acc = finish();
  if (nb % 2 != 0) {  // an odd last super-block
    __m512 s[K::kScVecs];
    K::lane_scales(g0, s);
    acc = K::step(K::load(g0), s, a0, acc);
  }
  return acc;
}

// One R x T tile over nsb super-blocks. Weights: row r's super-block b at w + r * w_row_bytes
// + b * kSbBytes (a split family: its image at w + r * w_row_bytes + b * kImageBytes, its side
// record at side + r * w_row_bytes + b * kSideBytes). Activations: token t's prepared
// super-block b at act + t * act_stride + b * kKActBytes. kInline (whole rows: w and side at
// their starts): lane scales decoded per (row, super-block) (few tokens); otherwise from sc
// (kScVecs * 16 floats per super-block, row r at sc + r * sc_stride). add: y += result, else
// y = result.
template <class K, int R, int T, bool kInline>
[[gnu::always_inline]] inline void kq_tile(const uint8_t* w, const uint8_t* side, size_t w_row_bytes, int64_t nsb,
                                           const uint8_t* act, size_t act_stride, const float* sc, int64_t sc_stride,
                                           float* y, int64_t y_stride, bool add) {
  constexpr int kScFloats = 16 * K::kScVecs, kImg = kq_image_bytes<K>(), kSide = kq_side_bytes<K>();
  __m512 acc[R][T];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  if constexpr (kInline && kSide > 0) {
    // The images' prefetch below steps over each row's side records and padding: theirs, as far ahead.
    const int64_t rest = static_cast<int64_t>(w_row_bytes) - nsb * kImg;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) prefetch_span_ahead(side + r * w_row_bytes, rest);
  }
  for (int64_t b = 0; b < nsb; ++b) {
    if constexpr (!kInline) {
      // A panel tile: the R rows' registers first, then each of a token's four activation
      // vectors is loaded once for all R rows (per row and token, 4 / R loads where a row at a
      // time took 4), the lane scales from sc.
      typename K::Regs regs[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) regs[r] = K::load(w + r * w_row_bytes + b * kImg);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const uint8_t* a = act + t * act_stride + b * kKActBytes;
        const __m512i start = K::dot_start(a);
        __m512i dot[R];
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) dot[r] = start;
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const __m512i x = kept(_mm512_loadu_si512(a + 64 * k));
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r) dot[r] = _mm512_dpbusd_epi32(dot[r], regs[r].w[k], x);
        }
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          __m512 s[K::kScVecs];
#pragma GCC unroll 2
          for (int i = 0; i < K::kScVecs; ++i) s[i] = _mm512_load_ps(sc + r * sc_stride + b * kScFloats + 16 * i);
          acc[r][t] = K::finish(dot[r], s, a, acc[r][t]);
        }
      }
      continue;
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const uint8_t* g = w + r * w_row_bytes + b * kImg;
      const typename K::Regs regs = K::load(g);
      // A few tokens stream the row from DRAM: its lines kStreamPrefetchBytes ahead.
#pragma GCC unroll 4
      for (int line = 0; line < (kImg + 63) / 64; ++line)
        prefetch_stream(g + 64 * line);
      __m512 s[K::kScVecs];
      if constexpr (kSide > 0)
        K::lane_scales(side + r * w_row_bytes + b * kSide, s);
      else
        K::lane_scales(g, s);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[r][t] = K::step(regs, s, act + t * act_stride + b * kKActBytes, acc[r][t]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      float* out = y + t * y_stride + r;
      const float v = _mm512_reduce_add_ps(acc[r][t]);
      *out = add ? *out + v : v;
    }
}

using KqTileFn = void (*)(const uint8_t*, const uint8_t*, size_t, int64_t, const uint8_t*, size_t, const float*,
                          int64_t, float*, int64_t, bool);

template <class K, bool kInline>
struct KqTiles {
  template <int R, int T>
  static void tile(const uint8_t* w, const uint8_t* side, size_t w_row_bytes, int64_t nsb, const uint8_t* act,
                   size_t act_stride, const float* sc, int64_t sc_stride, float* y, int64_t y_stride, bool add) {
    kq_tile<K, R, T, kInline>(w, side, w_row_bytes, nsb, act, act_stride, sc, sc_stride, y, y_stride, add);
  }
};

// gemm_packed: up to kFewMax (8) tokens, each row streamed once with its scales decoded inline
// (kR1 rows at a time; from kFewRowsFrom tokens 4 rows at a time in passes of up to 4 tokens,
// as act_q8_groups.h's gemm_few_rows: 1.1B decode at batch 8 on the Zen 5 VM, paired, q2_K
// 1.30x, q3_K 1.15x, IQ4_XS 1.34x, BENCHMARKS "Session 30"). More: tokens in panels whose
// prepared activations stay within 256 KiB (L2), columns in chunks of 8 super-blocks (a
// tile's tokens' chunk, 8 x 3 KiB, stays in L1), rows in panels of 64 whose lane scales are
// decoded once per chunk for every token tile, then kR x kT tiles (kq_tile's panel form):
// act_q8_groups.h's gemm_groups_prepared without partial groups.
template <class K, int kR, int kT, int kR1>
void kq_gemm_packed(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                    size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  if (r1 <= r0 || n_tokens <= 0) return;
  constexpr int kImg = kq_image_bytes<K>(), kSide = kq_side_bytes<K>();
  const int64_t nb = cols / kQKK;
  // Row r's image c and side record c (one and the same for a family that is not split).
  auto image = [&](int64_t r, int64_t c) { return w + r * w_row_bytes + c * kImg; };
  auto side = [&](int64_t r, int64_t c) {
    return kSide > 0 ? w + r * w_row_bytes + nb * kImg + c * kSide : image(r, c);
  };
  if constexpr (requires { K::row1(w, nb, act); }) {
    static_assert(!kq_split<K>(), "row1 reads the super-blocks whole");
    if (n_tokens == 1) {  // the family's own one-token row (K::row1)
      for (int64_t r = r0; r < r1; ++r) y[r] = _mm512_reduce_add_ps(K::row1(w + r * w_row_bytes, nb, act));
      return;
    }
  }
  // Up to 8 tokens (kFewMax) stream each row once, whatever the panel tile's kT.
  constexpr int64_t kFewMax = few_max_tokens<kT>();
  if (n_tokens <= kFewMax) {
    static constexpr TileTable<KqTileFn, kR1, kT, KqTiles<K, true>> table;
    const int nt = static_cast<int>(n_tokens);
    if (nt >= kFewRowsFrom) {  // kFewRows rows at a time in passes of up to kFewPass tokens
      static constexpr TileTable<KqTileFn, kFewRows, kFewPass, KqTiles<K, true>> few;
      for (int64_t r = r0; r < r1; r += kFewRows) {
        const int nr = static_cast<int>(min64(kFewRows, r1 - r));
        for (int t0 = 0; t0 < nt; t0 += kFewPass) {
          const int np = nt - t0 < kFewPass ? nt - t0 : kFewPass;
          few.fn[nr - 1][np - 1](image(r, 0), side(r, 0), w_row_bytes, nb, act + t0 * act_row_bytes, act_row_bytes,
                                 nullptr, 0, y + t0 * y_stride + r, y_stride, false);
        }
      }
      return;
    }
    for (int64_t r = r0; r < r1; r += kR1) {
      const int nr = static_cast<int>(min64(kR1, r1 - r));
      table.fn[nr - 1][nt - 1](image(r, 0), side(r, 0), w_row_bytes, nb, act, act_row_bytes, nullptr, 0, y + r,
                               y_stride, false);
    }
    return;
  }
  static constexpr TileTable<KqTileFn, kR, kT, KqTiles<K, false>> table;
  constexpr int64_t kChunk = 8, kRowPanel = 64, kPanelBytes = 256 << 10, kScFloats = 16 * K::kScVecs;
  const int64_t panel = kT * (1 + kPanelBytes / (kT * nb * kKActBytes));
  float* sc = thread_scratch(3, static_cast<size_t>(kRowPanel * kChunk * kScFloats));
  for (int64_t tp = 0; tp < n_tokens; tp += panel) {
    const int64_t np = min64(panel, n_tokens - tp);
    for (int64_t c = 0; c < nb; c += kChunk) {
      const int64_t nc = min64(kChunk, nb - c);
      for (int64_t rp = r0; rp < r1; rp += kRowPanel) {
        const int64_t nrp = min64(kRowPanel, r1 - rp);
        for (int64_t i = 0; i < nrp; ++i) {
          float* d = sc + i * kChunk * kScFloats;
          for (int64_t b = 0; b < nc; ++b) {
            __m512 s[K::kScVecs];
            K::lane_scales(side(rp + i, c + b), s);
            for (int v = 0; v < K::kScVecs; ++v) _mm512_store_ps(d + b * kScFloats + 16 * v, s[v]);
          }
        }
        for (int64_t t0 = 0; t0 < np; t0 += kT) {
          const int nt = static_cast<int>(min64(kT, np - t0));
          const uint8_t* at = act + (tp + t0) * act_row_bytes + c * kKActBytes;
          for (int64_t r = rp; r < rp + nrp; r += kR) {
            const int nr = static_cast<int>(min64(kR, rp + nrp - r));
            table.fn[nr - 1][nt - 1](image(r, c), side(r, c), w_row_bytes, nc, at, act_row_bytes,
                                     sc + (r - rp) * kChunk * kScFloats, kChunk * kScFloats,
                                     y + (tp + t0) * y_stride + r, y_stride, c > 0);
          }
        }
      }
    }
  }
}

// A kernel on the file's layout (whose gemm_prepared runs its gemm on the prepared rows'
// Q8_K part, gemm_on_q8k_part) with K's groups added: their prepare hooks, pack_rows and
// the packed gemm (kR x kT tiles for batches, up to 8 tokens streamed with inline scales).
// What each with_*_groups_avx512 (act_q8k.h) returns.
template <class K, int kR, int kT, int kR1>
MatmulKernel with_kq_groups(MatmulKernel k) {
  k.prepared_row_bytes = kq_prepared_row_bytes<K>;
  k.prepare = kq_prepare<K>;
  k.pack_rows = kq_pack_rows<K>;
  k.gemm_packed = kq_gemm_packed<K, kR, kT, kR1>;
  k.packed_row_align = kq_split<K>() ? 64 : 1;
  return k;
}

}  // namespace
}  // namespace th::cpu
