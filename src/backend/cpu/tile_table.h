// A table of a register-tiled kernel's instantiations for every tile size up to
// kR x kT, so that a driver runs its edge tiles (the last rows of a chunk, the
// last tokens of a batch) through the same code as the full ones: the kernels'
// loops are unrolled over R and T at compile time, and the table picks the
// instantiation at run time.
//
// No SIMD code here, but the tiles it points to are: include it only from the
// drivers that *_avx2.cpp / *_avx512.cpp files include. Everything is in an
// unnamed namespace, as in those drivers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/matmul_kernels.h"

namespace th::cpu {
namespace {

/// How far ahead (bytes) the few-token tiles, which stream each weight row once from
/// memory, ask for its lines, and with which prefetch (stream_prefetch(), matmul_kernels.h):
///   - L2 (`prefetcht1`), on every CPU but Zen 5. A `prefetcht0` holds one of the core's few
///     L1 miss buffers until its line arrives from memory, and those buffers, not memory, then
///     bound a thread's stream; L2 tracks more misses and the loads find the lines 8 KiB later.
///     Zen 4 VM (BENCHMARKS "Session 25"): the one-token matmuls from memory, one thread, q4_0 /
///     IQ4_NL / IQ4_XS 516 / 428-432 / 403-440 us -> 255 / 251 / 258 (prefetcht0 4 KiB ->
///     prefetcht1 8 KiB; `prefetchnta` 4 KiB 500-619 / 362-437 / 350-393; q2_K 157-167 -> 163),
///     and the 1.1B decodes' share of 34-37 GB/s probes IQ4_NL 72 -> 87%, IQ4_XS 73 -> 87%,
///     q4_0 66 -> 83%, q4_K 72 -> 90%, q8_0 78 -> 89%. Earlier: 1 KiB -> 4 KiB of prefetcht0 on
///     a Sapphire Rapids VM (session 10) took q4_0 73 -> 80% of the bandwidth, q2_K 55 -> 65%.
///   - Nta (`prefetchnta`), on AMD family 0x1A (Zen 5) and later: the lines go to L1 only, so
///     the stream neither evicts L2 nor sends L2's victims on to the L3. Zen 5 VM (BENCHMARKS
///     "Session 32"), the 1.1B decodes on two threads against prefetcht1 8 KiB, paired
///     medians of 2-4 runs of 3-5 rounds: q2_K 1.09-1.15, q3_K 1.04-1.17, IQ4_NL 1.09-1.19,
///     IQ4_XS 1.17-1.26, q4_0 1.06-1.10, q4_K 1.08-1.25, q6_K 1.03-1.10, q8_0 1.03-1.29; at
///     8 KiB it beat 2, 4, 12 and 16 KiB in a loop cut into a decode's products.
///   TOKENHIVE_STREAM_PREFETCH=l2|nta overrides the choice (to measure it on another CPU).
constexpr int kStreamPrefetchBytes = 8192;

/// Asks for the line at p + kStreamPrefetchBytes (as above: one well-predicted branch on a
/// flag set before main). The address is an integer's: past a matrix's last row, or a tile's
/// small copy of its rows' last groups, it points at no object (a prefetch never faults), and
/// pointer arithmetic there would be undefined (GCC's -Warray-bounds says so once a 4-row tile
/// is inlined on such a copy).
inline void prefetch_stream(const uint8_t* p) {
  const void* at = reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + kStreamPrefetchBytes);
  if (g_stream_prefetch_nta)
    __builtin_prefetch(at, 0, 0);
  else
    __builtin_prefetch(at, 0, 2);
}

/// 5-8 tokens on AVX-512 (kFewRowsFrom .. kFewRowsFrom - 1 + kFewPass): kFewRows rows at a time,
/// in passes of up to kFewPass tokens (act_q8_groups.h's gemm_few_rows and
/// kquant_groups_avx512.h's kq_gemm_packed, which say why).
constexpr int kFewRows = 4, kFewPass = 4, kFewRowsFrom = 5;

/// The most tokens an AVX-512 driver with panel tiles of kT tokens streams a row at a time
/// (its few-token paths): 8, or kT if that is more. Below kFewRowsFrom, its one-row table
/// (kT tokens wide) takes them.
template <int kT>
constexpr int64_t few_max_tokens() {
  static_assert(kT >= kFewRowsFrom - 1, "the one-row table covers the tokens below kFewRowsFrom");
  return kT > kFewRowsFrom - 1 + kFewPass ? kT : kFewRowsFrom - 1 + kFewPass;
}

/// Asks for the lines of [p, p + bytes) kStreamPrefetchBytes ahead (prefetch_stream each): at a
/// row's start, the part of a split packed row (its side records and padding) that the images'
/// own prefetch, a group at a time, steps over.
inline void prefetch_span_ahead(const uint8_t* p, int64_t bytes) {
  for (int64_t o = 0; o < bytes; o += 64) prefetch_stream(p + o);
}

/// fn[r - 1][t - 1] = &Tiles::template tile<r, t>, for r <= kR, t <= kT; Fn is the
/// function-pointer type every tile<R, T> has.
template <class Fn, int kR, int kT, class Tiles>
struct TileTable {
  Fn fn[kR][kT];
  constexpr TileTable() : fn() { fill<0>(); }
  template <int I>
  constexpr void fill() {
    if constexpr (I < kR * kT) {
      fn[I / kT][I % kT] = &Tiles::template tile<I / kT + 1, I % kT + 1>;
      fill<I + 1>();
    }
  }
};

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/// A loaded register kept as one: `const __m512i a = kept(_mm512_loadu_si512(p));`. GCC folds
/// a load into every use of its value that takes a memory operand (vpsrlw, vpandd,
/// vpdpbusd), so weight bytes decoded into two registers were read twice. The one-token
/// loops are bound by their loads (Zen 5 issues two 64-byte loads a cycle): IQ4_NL's lost
/// 20% to two such reloads a group (BENCHMARKS "Session 21"). The empty asm claims to change
/// the register, so the compiler cannot re-read memory in its place.
template <class V>
[[gnu::always_inline]] inline V kept(V v) {
  asm("" : "+v"(v));
  return v;
}

/// Rows [r0, r1) by n_tokens tokens, kR x kT tiles at a time and the edges through the
/// smaller ones, for tiles called as fn(w, w_row_bytes, act, act_row_bytes, cols, y,
/// y_stride) at their first row and token (the float and bf16 families).
template <int kR, int kT, class Table>
void run_tiles(const Table& table, const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
               const uint8_t* act, size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  for (int64_t r = r0; r < r1; r += kR) {
    const int nr = static_cast<int>(min64(kR, r1 - r));
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kT) {
      const int nt = static_cast<int>(min64(kT, n_tokens - t0));
      table.fn[nr - 1][nt - 1](w + r * w_row_bytes, w_row_bytes, act + t0 * act_row_bytes, act_row_bytes, cols,
                               y + t0 * y_stride + r, y_stride);
    }
  }
}

}  // namespace
}  // namespace th::cpu
