// The driver shared by the weight families whose activations are Q8_0 blocks
// (matmul_q8_0_*.cpp, matmul_q4_0_*.cpp), in AVX2 and AVX-512 VNNI alike: the
// ISAs differ only in the family trait's dot product (matmul_q8_0_group.h,
// matmul_q4_0_group.h). Include it from *_avx2.cpp / *_avx512.cpp files only:
// everything is in an unnamed namespace, so no SIMD code can stand in for a
// baseline function of the same name at link time.
//
// Why groups of four blocks. On Zen 3, vpmaddubsw, vpmaddwd, vpsignb, vmulps
// and vfmadd*ps all issue on the same two FP pipes (measured with loops of 12
// independent ops: each alone and any two mixed run at 2 per cycle, while
// vpand/vpaddd/vpblendd run at 4). A plain
// per-block dot (vpmaddubsw, vpmaddwd, then vcvtdq2ps and an FMA by d_w * d_x)
// spends 3-5 of those slots per block. Here a register holds 8 or 16 bytes of
// each of four blocks, one block per 32- or 64-bit lane group, so after the
// products one vpmaddwd, one vcvtdq2ps, one vmulps and one FMA serve four
// blocks: the per-lane scale vector simply holds each lane's block scale. The
// weight bytes are rearranged once per (row, group) and reused by the tile's
// tokens; the activation bytes are rearranged the same way once per matmul
// (prepare_row, the kernel's prepare hook), so it costs nothing per product.
// With VNNI, vpdpbusd (u8 x s8, four products summed into int32) replaces
// vpmaddubsw + vpmaddwd + vpaddd and starts from the prepared group's offset
// correction, so a (row, token, group) costs 4 vpdpbusd, vcvtdq2ps, vmulps and
// an FMA.
//
// AVX-512 runs groups of eight blocks in zmm registers (Group8 below: two 4-block
// groups side by side), so those last three ops serve twice the MACs: per 256
// MACs, 4 zmm vpdpbusd and 3 zmm ops where ymm spends 8 and 6. On Sapphire Rapids
// zmm vpdpbusd issues on one port and the float ops on two, so the products are
// no longer waiting on the conversions; on Zen 5 a zmm op does twice a ymm one's work.
//
// A family supplies a trait G:
//   V                   Vec256 or Vec512: the registers (V::kLanes int32 lanes)
//   kBlocks             blocks per group: 4 (Vec256) or 8 (Vec512)
//   kBytes              bytes per weight block (fp16 d first)
//   kActBytes           bytes per prepared activation group: X0..X3 (4 registers), then
//                       the lane offset corrections if any, then the lane scales d_x at
//                       kDxOffset (the three from GroupLayout<V, kDxOffset>)
//   Regs load(g)        one row's group from the group's first byte g
//   V::I dot(r, a)      the exact int32 dot product per lane with prepared group a
//   lane_block(l)       which block of the group lane l belongs to
//   dw_lanes(g, f16)    the lane scales of a row's group, in registers (few-token path)
//   prepare_group(...)  writes a prepared activation group from up to kBlocks Q8_0 blocks
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/act_q8.h"
#include "backend/cpu/tile_table.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {
namespace {

constexpr int kQ8Bytes = sizeof(BlockQ8_0);

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

inline __m256i loadu(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// The registers a group lives in: a block's share of one register is a 64-bit lane pair
// in Vec256 (4 blocks a group) and the same in Vec512 (8 blocks a group, AVX-512).
struct Vec256 {
  using I = __m256i;
  using F = __m256;
  static constexpr int kLanes = 8;
  static F zero() { return _mm256_setzero_ps(); }
  static F loadf(const float* p) { return _mm256_loadu_ps(p); }
  static void storef(float* p, F v) { _mm256_store_ps(p, v); }
  static F scale_fma(I dot, F s, F acc) { return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), s, acc); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static float hsum(F v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

#ifdef __AVX512F__
struct Vec512 {
  using I = __m512i;
  using F = __m512;
  static constexpr int kLanes = 16;
  static F zero() { return _mm512_setzero_ps(); }
  static F loadf(const float* p) { return _mm512_loadu_ps(p); }
  static void storef(float* p, F v) { _mm512_store_ps(p, v); }
  static F scale_fma(I dot, F s, F acc) { return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static float hsum(F v) { return _mm512_reduce_add_ps(v); }
};
#endif

// Where a family's prepared activation group keeps what follows X0..X3 (4 registers of
// V): the int32 lane corrections (when the family has them) right after, the f32 lane
// scales d_x at kDxOffset.
template <class V, int kDx>
struct GroupLayout {
  static constexpr int kCorrOffset = 4 * static_cast<int>(sizeof(typename V::I));
  static constexpr int kDxOffset = kDx;
  static constexpr int kActBytes = kDx + static_cast<int>(sizeof(typename V::F));
};

// The VNNI dot product of a group whose prepared activations carry the int32 offset
// correction of every lane at corr_offset: four vpdpbusd (u8 weights w x s8 activations)
// starting from the correction.
inline __m256i dot_vnni(const __m256i (&w)[4], const uint8_t* a, int corr_offset) {
  __m256i acc = loadu(a + corr_offset);
  for (int k = 0; k < 4; ++k) acc = _mm256_dpbusd_epi32(acc, w[k], loadu(a + 32 * k));
  return acc;
}

// The AVX2 dot product of a group of signed weights w (|w| in w_abs) with prepared group a:
// vpsignb puts each weight's sign on its activation, so vpmaddubsw multiplies |w| (u8) by
// +-x (s8), exactly (Q8_0 and IQ4_NL).
inline __m256i dot_signed_avx2(const __m256i (&w)[4], const __m256i (&w_abs)[4], const uint8_t* a) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i s[4];
  for (int k = 0; k < 4; ++k)
    s[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs[k], _mm256_sign_epi8(loadu(a + 32 * k), w[k])), ones);
  return _mm256_add_epi32(_mm256_add_epi32(s[0], s[1]), _mm256_add_epi32(s[2], s[3]));
}

// The lane scales of a group from its blocks' fp16 scales (zero for blocks past n).
template <class G>
inline void lane_scales(const uint8_t* first_block, int stride, int n, const float* f16, float* out) {
  float d[G::kBlocks] = {};
  for (int i = 0; i < n; ++i) d[i] = f16[load_u16(first_block + i * stride)];
  for (int l = 0; l < G::V::kLanes; ++l) out[l] = d[G::lane_block(l)];
}

// The activations of n_tokens tokens, prepared group by group: token t's group g at
// base + t * token_bytes + g * kActBytes. A last partial group is padded with zero
// blocks (x = 0, d_x = 0), so it adds nothing whatever the weights there are.
template <class G>
struct PreparedAct {
  const uint8_t* base;
  size_t token_bytes;
};

template <class G>
size_t prepared_row_bytes(int64_t cols) {
  const int64_t nb = cols / kQK;
  return static_cast<size_t>((nb + G::kBlocks - 1) / G::kBlocks) * G::kActBytes;
}

// One token's Q8_0 row (cols / 32 blocks at act) -> its prepared groups at dst.
template <class G>
void prepare_row(const uint8_t* act, int64_t cols, uint8_t* dst) {
  const int64_t nb = cols / kQK;
  const int64_t ng = (nb + G::kBlocks - 1) / G::kBlocks;
  const float* f16 = f16_table();
  for (int64_t g = 0; g < ng; ++g) {
    const int n = static_cast<int>(min64(G::kBlocks, nb - g * G::kBlocks));
    uint8_t* out = dst + g * G::kActBytes;
    G::prepare_group(act + g * G::kBlocks * kQ8Bytes, n, out);
    lane_scales<G>(act + g * G::kBlocks * kQ8Bytes, kQ8Bytes, n, f16, reinterpret_cast<float*>(out + G::kDxOffset));
  }
}

// Packed groups (Packed below) keep their images and their side records (the blocks' fp16
// scales) apart: a row's full groups' images, then their side records (kSplit, as
// kquant_groups_avx512.h's kq_split); the file's layout keeps each group whole.
template <class G>
constexpr bool kSplit = requires { G::kSideBytes; };
template <class G>
constexpr int image_bytes() {
  if constexpr (kSplit<G>) return G::kImageBytes;
  return G::kBlocks * G::kBytes;
}
template <class G>
constexpr int side_bytes() {
  if constexpr (kSplit<G>) return G::kSideBytes;
  return 0;
}

// One R x T tile over ng groups. Weights: row r's group g at w + r * w_row_bytes +
// g * kBlocks * kBytes (packed: its image at w + r * w_row_bytes + g * kImageBytes, its side
// record at scales + r * w_row_bytes + g * kSideBytes). Activations: token t's group g at act + t *
// act_stride + g * kActBytes. kInlineScales (whole rows: w and scales at their starts): d_w
// comes from the table per (row, group) (few tokens: little to reuse); otherwise from dwf (8
// lane scales per group, row r at dwf + r * dwf_stride), converted once per row panel and
// reused by every token tile. add: y += result, else y = result. (Inlined into
// GroupTiles::tile, the function the tables point to: a call in between cost 0.6% of the
// instructions of a 110m q8_0 run, callgrind.)
template <class G, int R, int T, bool kInlineScales>
[[gnu::always_inline]] inline void group_tile(const uint8_t* w, const uint8_t* scales, size_t w_row_bytes, int64_t ng,
                                              const uint8_t* act, size_t act_stride, const float* dwf,
                                              int64_t dwf_stride, const float* f16, float* y, int64_t y_stride,
                                              bool add) {
  using V = typename G::V;
  constexpr int kGroupBytes = image_bytes<G>();
  typename V::F acc[R][T];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[r][t] = V::zero();
  if constexpr (kInlineScales && kSplit<G>) {
    // The images' prefetch below steps over each row's scales (and what follows them up to
    // the next row): theirs, as far ahead.
    const int64_t rest = static_cast<int64_t>(w_row_bytes) - ng * kGroupBytes;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) prefetch_span_ahead(scales + r * w_row_bytes, rest);
  }
  for (int64_t g = 0; g < ng; ++g) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const uint8_t* wg = w + r * w_row_bytes + g * kGroupBytes;
      const typename G::Regs regs = G::load(wg);
      typename V::F dw;
      if constexpr (kInlineScales) {
        // A few tokens stream the row from DRAM: ask for the lines kStreamPrefetchBytes
        // ahead (on Zen 5, q4_0 2048 x 2048, best of 200, none -> 1 KiB: 13.7 -> 14-17.6
        // GB/s); the file's layout up to two lines a group, as measured (a 4-block q8_0
        // group spans three), a packed image all of its lines.
        prefetch_stream(wg);
        constexpr int kAllLines = (kGroupBytes + 63) / 64;
        constexpr int kLines = !kSplit<G> && G::kBlocks == 4 && kAllLines > 2 ? 2 : kAllLines;
#pragma GCC unroll 8
        for (int line = 1; line < kLines; ++line)
          prefetch_stream(wg + 64 * line);
        if constexpr (kSplit<G>)
          dw = G::scale_lanes(scales + r * w_row_bytes + g * side_bytes<G>());
        else
          dw = G::dw_lanes(wg, f16);
      } else {
        dw = V::loadf(dwf + r * dwf_stride + g * V::kLanes);
      }
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const uint8_t* a = act + t * act_stride + g * G::kActBytes;
        const typename V::F s = V::mul(dw, V::loadf(reinterpret_cast<const float*>(a + G::kDxOffset)));
        acc[r][t] = V::scale_fma(G::dot(regs, a), s, acc[r][t]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      float* out = y + t * y_stride + r;
      *out = add ? *out + V::hsum(acc[r][t]) : V::hsum(acc[r][t]);
    }
}

using TileFn = void (*)(const uint8_t*, const uint8_t*, size_t, int64_t, const uint8_t*, size_t, const float*,
                        int64_t, const float*, float*, int64_t, bool);

template <class G, bool kInlineScales>
struct GroupTiles {
  template <int R, int T>
  static void tile(const uint8_t* w, const uint8_t* scales, size_t w_row_bytes, int64_t ng, const uint8_t* act,
                   size_t act_stride, const float* dwf, int64_t dwf_stride, const float* f16, float* y,
                   int64_t y_stride, bool add) {
    group_tile<G, R, T, kInlineScales>(w, scales, w_row_bytes, ng, act, act_stride, dwf, dwf_stride, f16, y, y_stride,
                                       add);
  }
};

// Tiles of every size up to kR x kT, for the edges: fn[r - 1][t - 1].
template <class G, int kR, int kT, bool kInlineScales>
using GroupTileTable = TileTable<TileFn, kR, kT, GroupTiles<G, kInlineScales>>;

// The last, partial group of nr rows copied into zero-padded groups (rows kBlocks * kBytes
// apart), so the tile reads only bytes of the matrix; missing blocks get d_w = 0. Packed, each
// copy is a row of one group: its image, then its side record (scales()).
template <class G>
struct TailRows {
  static constexpr int kRowBytes = G::kBlocks * G::kBytes;
  alignas(64) uint8_t bytes[8][kRowBytes];
  const uint8_t* scales() const { return bytes[0] + image_bytes<G>(); }
  void fill(const uint8_t* w, size_t w_row_bytes, int64_t nb, int nr) {
    const int64_t g = nb / G::kBlocks;
    const int n = static_cast<int>(nb - g * G::kBlocks);
    for (int r = 0; r < nr; ++r) {
      std::memset(bytes[r], 0, kRowBytes);
      std::memcpy(bytes[r], w + r * w_row_bytes + g * kRowBytes, static_cast<size_t>(n) * G::kBytes);
      if constexpr (kSplit<G>) G::pack_group(bytes[r], bytes[r], bytes[r] + G::kImageBytes);  // as load wants
    }
  }
};

// 5-8 tokens on AVX-512 (gemm_groups_prepared's few-token case): kFewRows rows at a time, in
// passes of up to kFewPass tokens over them (the first pass streams the rows from memory,
// the next finds them in L1), so that a tile's weight registers serve four tokens and its
// tokens' prepared groups four rows, where a row at a time reloads every token's group for
// each row. The rows' sums are those of a row at a time, bit for bit (the same order over
// the groups). Zen 5 VM, 1.1B decode at batch 8, tokens/s paired against a row at a time (3
// alternated rounds, BENCHMARKS "Session 30"): q4_0 1.32, IQ4_NL 1.31, q8_0 1.39. At 4
// tokens (one pass) it lost 6-8% (four row streams read memory worse than one, and there the
// loads weigh less), and 2 rows x 8 tokens in one pass gained only 8-9% at 8.
template <class G>
void gemm_few_rows(const uint8_t* w, size_t w_row_bytes, int64_t nb, int64_t r0, int64_t r1, const PreparedAct<G>& a,
                   int nt, const float* f16, float* y, int64_t y_stride) {
  static constexpr GroupTileTable<G, kFewRows, kFewPass, true> table;
  const int64_t ng_full = nb / G::kBlocks;
  const bool has_tail = nb % G::kBlocks != 0;
  TailRows<G> tail;
  for (int64_t r = r0; r < r1; r += kFewRows) {
    const int nr = static_cast<int>(min64(kFewRows, r1 - r));
    const uint8_t* wr = w + r * w_row_bytes;
    const uint8_t* scales = kSplit<G> ? wr + ng_full * image_bytes<G>() : wr;
    if (has_tail) tail.fill(wr, w_row_bytes, nb, nr);
    for (int t0 = 0; t0 < nt; t0 += kFewPass) {
      const int np = nt - t0 < kFewPass ? nt - t0 : kFewPass;
      const uint8_t* at = a.base + t0 * a.token_bytes;
      float* yt = y + t0 * y_stride + r;
      if (ng_full > 0)
        table.fn[nr - 1][np - 1](wr, scales, w_row_bytes, ng_full, at, a.token_bytes, nullptr, 0, f16, yt, y_stride,
                                 false);
      if (has_tail)
        table.fn[nr - 1][np - 1](tail.bytes[0], tail.scales(), TailRows<G>::kRowBytes, 1, at + ng_full * G::kActBytes,
                                 a.token_bytes, nullptr, 0, f16, yt, y_stride, ng_full > 0);
    }
  }
}

// The whole gemm for a weight family.
//   Up to kT tokens: kR1 rows at a time stream their weights once; scales come from the table.
//   kR1 = 1: a single sequential stream from DRAM runs at 13.7 GB/s on q4_0 2048 x 2048
//   where four interleaved rows ran at 8.7 (one core, best of 200; a plain read loop: 17-19).
//   Several tokens: tokens in panels whose prepared activations take at most 256 KiB (they
//   stay in L2), columns in chunks of kChunk groups, 64 blocks (a tile's tokens' chunk stays
//   in L1: 8 x 16 groups x 192 bytes = 24 KiB for 4-block groups of q4_0), rows in panels of kRowPanel (the panel's chunk,
//   64 x 1.1 KiB for q4_0, stays in L2 while every token tile of the panel passes over it),
//   and kR x kT tiles inside. Measured on 2048 x 2048 q4_0, 128 tokens: chunks of 32 groups
//   and of 8 are 5-15% slower than 16. AVX-512 runs 4 x 4 tiles (a row's registers serve 4
//   tokens, a token's group 4 rows) where AVX2 runs 1 x 8: 1.1B prefill of 512 on the Zen 5
//   VM, paired against 1 x 8, q4_0 0.98-1.18 (median 1.09), q8_0 1.07-1.12, IQ4_NL 1.02-1.09
//   (BENCHMARKS "Session 30").
template <class G, int kR, int kT, int kR1>
void gemm_groups_prepared(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                          const uint8_t* prepared, size_t prepared_bytes, int64_t n_tokens, float* y,
                          int64_t y_stride) {
  static_assert(kR1 <= 8 && kR <= 8);
  if (r1 <= r0 || n_tokens <= 0) return;
  const int64_t nb = cols / kQK;
  const int64_t ng_full = nb / G::kBlocks;
  const bool has_tail = nb % G::kBlocks != 0;
  const int64_t ng = ng_full + (has_tail ? 1 : 0);
  const float* f16 = f16_table();
  TailRows<G> tail;
  // Row r's full group g: its image, and its side record (packed) or the group itself.
  auto image = [&](int64_t r, int64_t g) { return w + r * w_row_bytes + g * image_bytes<G>(); };
  auto scales = [&](int64_t r, int64_t g) {
    return kSplit<G> ? w + r * w_row_bytes + ng_full * image_bytes<G>() + g * side_bytes<G>() : image(r, g);
  };

  // AVX-512 takes up to 8 tokens here whatever its panel tiles' kT (gemm_few_rows: 5-8).
  constexpr int64_t kFewMax = G::V::kLanes == 16 ? few_max_tokens<kT>() : kT;
  if (n_tokens <= kFewMax) {
    // Up to one tile of tokens (decode, small batches): stream each row once, scales from
    // the table, no pass over the rows' scales beforehand (that pass and the tiles would
    // not overlap: 2 tokens cost 1.85x one token that way, from DRAM).
    static constexpr GroupTileTable<G, kR1, kT, true> table;
    const int nt = static_cast<int>(n_tokens);
    const PreparedAct<G> a{prepared, prepared_bytes};
    if constexpr (G::V::kLanes == 16) {
      if (nt >= kFewRowsFrom) return gemm_few_rows<G>(w, w_row_bytes, nb, r0, r1, a, nt, f16, y, y_stride);
    }
    for (int64_t r = r0; r < r1; r += kR1) {
      const int nr = static_cast<int>(min64(kR1, r1 - r));
      const uint8_t* wr = w + r * w_row_bytes;
      if (ng_full > 0)
        table.fn[nr - 1][nt - 1](wr, scales(r, 0), w_row_bytes, ng_full, a.base, a.token_bytes, nullptr, 0, f16, y + r,
                                 y_stride, false);
      if (has_tail) {
        tail.fill(wr, w_row_bytes, nb, nr);
        table.fn[nr - 1][nt - 1](tail.bytes[0], tail.scales(), TailRows<G>::kRowBytes, 1,
                                 a.base + ng_full * G::kActBytes, a.token_bytes, nullptr, 0, f16, y + r, y_stride,
                                 ng_full > 0);
      }
    }
    return;
  }

  using V = typename G::V;
  static constexpr GroupTileTable<G, kR, kT, false> table;
  constexpr int kGroupBytes = G::kBlocks * G::kBytes, kLanes = V::kLanes;
  // kChunk: 64 blocks, whatever the group size.
  constexpr int64_t kChunk = 64 / G::kBlocks, kRowPanel = 64, kPanelBytes = 256 << 10;
  // As many whole tiles of tokens as keep the prepared panel within half of L2.
  const int64_t panel = kT * (1 + kPanelBytes / (kT * ng * G::kActBytes));
  float* dwf = thread_scratch(3, static_cast<size_t>(kRowPanel * kChunk * kLanes));
  for (int64_t tp = 0; tp < n_tokens; tp += panel) {
    const int64_t np = min64(panel, n_tokens - tp);
    const PreparedAct<G> a{prepared + tp * prepared_bytes, prepared_bytes};
    float* yp = y + tp * y_stride;
    for (int64_t c = 0; c < ng; c += kChunk) {
      const int64_t nc = min64(kChunk, ng - c);           // groups in this chunk, tail included
      const bool chunk_has_tail = has_tail && c + nc == ng;
      const int64_t nc_full = nc - (chunk_has_tail ? 1 : 0);
      for (int64_t rp = r0; rp < r1; rp += kRowPanel) {
        const int64_t nrp = min64(kRowPanel, r1 - rp);
        // Lane scales of the panel's rows for this chunk, converted once for all its tokens.
        // Full groups straight from registers (8 scalar stores per group cost 8% of the
        // instructions at 32 tokens), the partial last one through lane_scales.
        for (int64_t i = 0; i < nrp; ++i) {
          float* d = dwf + i * kChunk * kLanes;
          for (int64_t g = 0; g < nc_full; ++g) {
            if constexpr (kSplit<G>)
              V::storef(d + g * kLanes, G::scale_lanes(scales(rp + i, c + g)));
            else
              V::storef(d + g * kLanes, G::dw_lanes(image(rp + i, c + g), f16));
          }
          if (chunk_has_tail)  // the file's layout, packed or not
            lane_scales<G>(w + (rp + i) * w_row_bytes + (c + nc_full) * kGroupBytes, G::kBytes,
                           static_cast<int>(nb - ng_full * G::kBlocks), f16, d + nc_full * kLanes);
        }
        for (int64_t t0 = 0; t0 < np; t0 += kT) {
          const int nt = static_cast<int>(min64(kT, np - t0));
          const uint8_t* at = a.base + t0 * a.token_bytes + c * G::kActBytes;
          for (int64_t r = rp; r < rp + nrp; r += kR) {
            const int nr = static_cast<int>(min64(kR, rp + nrp - r));
            const float* dw = dwf + (r - rp) * kChunk * kLanes;
            float* yt = yp + t0 * y_stride + r;
            if (nc_full > 0)
              table.fn[nr - 1][nt - 1](image(r, c), scales(r, c), w_row_bytes, nc_full, at, a.token_bytes, dw,
                                       kChunk * kLanes, f16, yt, y_stride, c > 0);
            if (chunk_has_tail) {
              tail.fill(w + r * w_row_bytes, w_row_bytes, nb, nr);
              table.fn[nr - 1][nt - 1](tail.bytes[0], tail.scales(), TailRows<G>::kRowBytes, 1,
                                       at + nc_full * G::kActBytes, a.token_bytes, dw + nc_full * kLanes,
                                       kChunk * kLanes, f16, yt, y_stride, c > 0 || nc_full > 0);
            }
          }
        }
      }
    }
  }
}

// The gemm from Q8_0 rows: prepares the tokens' activations into per-thread scratch, then
// runs gemm_groups_prepared. (The backend prepares once per matmul instead, through the
// kernel's prepare hook, so that each thread's row chunks do not redo it.)
template <class G, int kR, int kT, int kR1>
void gemm_groups(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                 size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  if (r1 <= r0 || n_tokens <= 0) return;
  const size_t pb = prepared_row_bytes<G>(cols);
  auto* prepared = reinterpret_cast<uint8_t*>(thread_scratch(0, (pb * static_cast<size_t>(n_tokens) + 3) / 4));
  for (int64_t t = 0; t < n_tokens; ++t) prepare_row<G>(act + t * act_row_bytes, cols, prepared + t * pb);
  gemm_groups_prepared<G, kR, kT, kR1>(w, w_row_bytes, cols, r0, r1, prepared, pb, n_tokens, y, y_stride);
}

#ifdef __AVX512F__
// Eight blocks a group for AVX-512 from a family's 4-block VNNI trait G4: register k
// holds G4's register k of blocks 0-3 in its low half and of blocks 4-7 in its high
// half; the prepared activations likewise interleave two G4 groups 32 bytes at a time.
template <class G4>
struct Group8 : GroupLayout<Vec512, 320> {
  static_assert(G4::kBlocks == 4 && G4::kCorrOffset == 128 && G4::kDxOffset == 160);
  using V = Vec512;
  static constexpr int kBlocks = 8;
  static constexpr int kBytes = G4::kBytes;
  static constexpr int lane_block(int l) { return l < 8 ? G4::lane_block(l) : 4 + G4::lane_block(l - 8); }

  struct Regs {
    __m512i w[4];
  };
  static Regs load(const uint8_t* g) {
    const typename G4::Regs lo = G4::load(g), hi = G4::load(g + 4 * kBytes);
    Regs r;
    for (int k = 0; k < 4; ++k) r.w[k] = _mm512_inserti64x4(_mm512_castsi256_si512(lo.w[k]), hi.w[k], 1);
    return r;
  }
  // The packed image: G4's images of the two halves interleaved 32 bytes at a time, so that
  // register k is one 64-byte load (plus G4's own work on it).
  static constexpr int kImageBytes = 2 * G4::kImageBytes;
  static void write_image(const uint8_t* g, uint8_t* img) {
    alignas(32) uint8_t half[2][G4::kImageBytes];
    G4::write_image(g, half[0]);
    G4::write_image(g + 4 * kBytes, half[1]);
    for (int i = 0; i < G4::kImageBytes / 32; ++i)
      for (int h = 0; h < 2; ++h) std::memcpy(img + 64 * i + 32 * h, half[h] + 32 * i, 32);
  }
  static Regs from_image(const uint8_t* img) {
    Regs r;
    G4::from_image512(img, r.w);
    return r;
  }
  static __m512i dot(const Regs& r, const uint8_t* a) {
    __m512i acc = _mm512_loadu_si512(a + kCorrOffset);
    for (int k = 0; k < 4; ++k) acc = _mm512_dpbusd_epi32(acc, r.w[k], _mm512_loadu_si512(a + 64 * k));
    return acc;
  }
  static __m512 dw_lanes(const uint8_t* g, const float* f16) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(G4::dw_lanes(g, f16)), G4::dw_lanes(g + 4 * kBytes, f16), 1);
  }
  static void prepare_group(const uint8_t* x, int n, uint8_t* out) {
    std::memset(out, 0, kDxOffset);
    alignas(32) uint8_t half[G4::kActBytes];
    for (int h = 0; h < 2 && 4 * h < n; ++h) {
      G4::prepare_group(x + 4 * h * kQ8Bytes, n - 4 * h < 4 ? n - 4 * h : 4, half);
      for (int k = 0; k < 4; ++k) std::memcpy(out + 64 * k + 32 * h, half + 32 * k, 32);
      std::memcpy(out + kCorrOffset + 32 * h, half + G4::kCorrOffset, 32);
    }
  }
};
#endif

// Weights repacked at load (the kernel's pack_rows, run by CpuBackend::prepare_weight):
// every full group becomes G's register image (write_image), and its blocks' fp16 scales in
// block order go to the row's side records: a packed row holds its full groups' images,
// then their side records (kSplit), then its last, partial group in the file's layout (lane_scales
// reads it as before, and TailRows packs its padded copy), in the file's row bytes. Only
// load (G's from_image: the shuffles were done once, at load) and the lane scales (one
// vcvtph2ps and one vpermps instead of a table lookup per block) differ from the file's
// layout. Measured before building it (micro_bench, one thread, AVX-512, 5632 x 2048, the
// loads replaced by the packed ones, results ignored): q4_0 1.3x at 32 and 128 tokens,
// 1.7-2.5x one token from L2; q8_0 1.4-1.8x at 32 tokens, 1.3x one token from memory. The
// images apart from the scales are whole cache lines on the backend's 64-byte row strides,
// where a 144-byte group straddled three (BENCHMARKS "Session 22").
template <class G>
struct Packed : G {
  using V = typename G::V;
  static constexpr int kGroupBytes = G::kBlocks * G::kBytes;
  static constexpr int kSideBytes = 2 * G::kBlocks;
  static_assert(G::kImageBytes % 64 == 0 && G::kImageBytes + kSideBytes == kGroupBytes,
                "a packed group keeps the file's size, its image whole cache lines");

  static typename G::Regs load(const uint8_t* g) { return G::from_image(g); }
  // The lane scales from a group's side record s.
  static typename V::F scale_lanes(const uint8_t* s) {
    if constexpr (V::kLanes == 8) {
      const __m128 d = _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s)));
      const __m256i idx = _mm256_setr_epi32(G::lane_block(0), G::lane_block(1), G::lane_block(2), G::lane_block(3),
                                            G::lane_block(4), G::lane_block(5), G::lane_block(6), G::lane_block(7));
      return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(d), idx);
    } else {
#ifdef __AVX512F__
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
      const __m512i idx = _mm512_setr_epi32(
          G::lane_block(0), G::lane_block(1), G::lane_block(2), G::lane_block(3), G::lane_block(4), G::lane_block(5),
          G::lane_block(6), G::lane_block(7), G::lane_block(8), G::lane_block(9), G::lane_block(10),
          G::lane_block(11), G::lane_block(12), G::lane_block(13), G::lane_block(14), G::lane_block(15));
      return _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(d));
#endif
    }
  }
  // A group of kBlocks file blocks at raw -> its image at img and its side record at sc
  // (raw == img, sc == img + kImageBytes is fine: TailRows' one-group rows).
  static void pack_group(const uint8_t* raw, uint8_t* img, uint8_t* sc) {
    alignas(64) uint8_t image[G::kImageBytes];
    uint8_t scales[kSideBytes];
    G::write_image(raw, image);
    for (int b = 0; b < G::kBlocks; ++b) std::memcpy(scales + 2 * b, raw + b * G::kBytes, 2);
    std::memcpy(img, image, G::kImageBytes);
    std::memcpy(sc, scales, kSideBytes);
  }
};

// Rows [r0, r1) of W in the file's layout -> the packed layout at out, rows out_row_bytes apart
// (the padding zeroed).
template <class G>
void pack_rows(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, uint8_t* out,
               size_t out_row_bytes) {
  using P = Packed<G>;
  const int64_t ng_full = cols / kQK / G::kBlocks;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* src = w + r * w_row_bytes;
    uint8_t* dst = out + r * out_row_bytes;
    for (int64_t g = 0; g < ng_full; ++g)
      P::pack_group(src + g * P::kGroupBytes, dst + g * G::kImageBytes,
                    dst + ng_full * G::kImageBytes + g * P::kSideBytes);
    std::memcpy(dst + ng_full * P::kGroupBytes, src + ng_full * P::kGroupBytes,
                w_row_bytes - ng_full * P::kGroupBytes);
    std::memset(dst + w_row_bytes, 0, out_row_bytes - w_row_bytes);
  }
}

// A family's kernel object: kR x kT tiles for batches, kR1 rows for up to kT tokens.
template <class G, int kR, int kT, int kR1>
constexpr MatmulKernel group_kernel(DType weight, Isa isa, void (*convert_act)(const float*, void*, int64_t)) {
  return {weight,
          DType::Q8_0,
          isa,
          convert_act,
          gemm_groups<G, kR, kT, kR1>,
          prepared_row_bytes<G>,
          prepare_row<G>,
          gemm_groups_prepared<G, kR, kT, kR1>,
          pack_rows<G>,
          gemm_groups_prepared<Packed<G>, kR, kT, kR1>,
          64};  // packed rows on cache lines
}

}  // namespace
}  // namespace th::cpu
