// The panel multiply cores (act_q8k.h) as one template over the ISA's vector
// primitives, shared by act_q8k_avx2.cpp and act_q8k_avx512.cpp. Include it
// from those files only: everything is in an unnamed namespace, so no SIMD code
// can stand in for a baseline function of the same name at link time.
//
// A core computes an R-row x T-token register tile over panel rows: per chunk
// of V::kChunk elements, the rows' unpacked weights and scales are loaded once
// for all T tokens, then vpmaddubsw (u8 weight x s8 activation, pairs to
// int16) and a multiply by the int16 scales (vpmaddwd + vpaddd in AVX2,
// vpdpwssd in AVX-512) add into one int32 accumulator per (row, token); each
// block ends with one float multiply-add per (row, token) (d_w * d_a) plus the
// folded mins / -32 offset.
//
// An ISA supplies a trait V:
//   IVec, FVec, kChunk            int32 / f32 vectors of kChunk / 4 lanes (kChunk int8 inputs)
//   kTileRows                     rows per tile (tokens per tile: kTileTokens)
//   izero(), fzero(), set1(f), load8(p)   load8: 8 floats (32-byte aligned), zero above
//   load_act(p), load_q(p)        kChunk int8 activations (unaligned) / panel levels (aligned)
//   K4Scales k4_scales(PanelK4)   a block's scales in the form k4_scale(s, k) reads chunk k's from
//   k6_scale(PanelK6, k)          chunk k's int16 scales
//   dot_add(acc, w, a, sc)        acc + sum of sc * (w * a) pairs, per int32 lane
//   keep(acc)                     pins an accumulator to a register (see below)
//   cvt(i), mul, fmadd, sub_off(acc, off256), hsum(f)
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backend/cpu/act_q8k.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {
namespace {

constexpr size_t kQ8KBytes = sizeof(BlockQ8_K);
constexpr size_t kQsOffset = offsetof(BlockQ8_K, qs);
constexpr size_t kBsumsOffset = offsetof(BlockQ8_K, bsums);
constexpr int kTileTokens = 4;

inline float load_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}

// The offset multipliers tile_k6 folds with the activation sums (q6_K, q3_K: m32; q2_K: mins).
inline const int16_t* offsets(const PanelK6& p) { return p.m32; }
inline const int16_t* offsets(const PanelK2& p) { return p.mins; }

template <class V>
struct PanelCores {
  using IVec = typename V::IVec;
  using FVec = typename V::FVec;
  static constexpr int kSteps = kQKK / V::kChunk;

  template <class Vec, int R, int T>
  static void fill(Vec (&v)[R][T], Vec x) {
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) v[r][t] = x;
  }
  // Chunk k of block b of the T tokens' activations.
  template <int T>
  static void load_acts(const uint8_t* const* act, int64_t b, int k, IVec (&a)[T]) {
    for (int t = 0; t < T; ++t) a[t] = V::load_act(act[t] + b * kQ8KBytes + kQsOffset + V::kChunk * k);
  }

  // q4_K / q5_K: sum over blocks of d_a * (d_w * S + mins . bsum32), S the integer sum of
  // sc[j] * q * a; the mins term comes from `abs` (per token and block: d_a times the eight
  // 32-element activation sums, precomputed once per token tile for all rows).
  // out[r * T + t] = dot(row r, token t).
  template <int R, int T>
  static void tile_k4(const PanelK4* const* rows, int64_t nb, const uint8_t* const* act, const float* abs,
                      float* out) {
    FVec facc[R][T];
    fill(facc, V::fzero());
    for (int64_t b = 0; b < nb; ++b) {
      IVec acc[R][T];
      fill(acc, V::izero());
      typename V::K4Scales sc_all[R];
      for (int r = 0; r < R; ++r) sc_all[r] = V::k4_scales(rows[r][b]);
#pragma GCC unroll 8
      for (int k = 0; k < kSteps; ++k) {
        IVec a[T];
        load_acts<T>(act, b, k, a);
        for (int r = 0; r < R; ++r) {
          const IVec w = V::load_q(rows[r][b].q + V::kChunk * k);
          const IVec sc = V::k4_scale(sc_all[r], k);
          for (int t = 0; t < T; ++t) {
            acc[r][t] = V::dot_add(acc[r][t], w, a[t], sc);
            V::keep(acc[r][t]);
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        const FVec da = V::set1(load_f32(act[t] + b * kQ8KBytes));
        const FVec ab = V::load8(abs + (t * nb + b) * 8);
        for (int r = 0; r < R; ++r) {
          const PanelK4& p = rows[r][b];
          const FVec dd = V::mul(V::set1(p.d), da);
          facc[r][t] = V::fmadd(V::cvt(acc[r][t]), dd, facc[r][t]);
          facc[r][t] = V::fmadd(V::load8(p.mins), ab, facc[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) out[r * T + t] = V::hsum(facc[r][t]);
  }

  // q6_K: sum over blocks of d_w * d_a * (S - m32 . bsums), S as above with 16-element
  // sub-blocks (each 32-element scale vector holds two scales).
  // q2_K (PanelK2): the same with the offset scaled by dmin: d_a * (d_w * S - dmin * m . bsums).
  template <class Panel, int R, int T>
  static void tile_k6(const Panel* const* rows, int64_t nb, const uint8_t* const* act, float* out) {
    constexpr bool k2 = std::is_same_v<Panel, PanelK2>;
    FVec facc[R][T];
    fill(facc, V::fzero());
    for (int64_t b = 0; b < nb; ++b) {
      IVec acc[R][T];
      fill(acc, V::izero());
#pragma GCC unroll 8
      for (int k = 0; k < kSteps; ++k) {
        IVec a[T];
        load_acts<T>(act, b, k, a);
        for (int r = 0; r < R; ++r) {
          const Panel& p = rows[r][b];
          const IVec w = V::load_q(p.q + V::kChunk * k);
          const IVec sc = V::k6_scale(p, k);
          for (int t = 0; t < T; ++t) {
            acc[r][t] = V::dot_add(acc[r][t], w, a[t], sc);
            V::keep(acc[r][t]);
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        const uint8_t* blk = act[t] + b * kQ8KBytes;
        const FVec da = V::set1(load_f32(blk));
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kBsumsOffset));
        for (int r = 0; r < R; ++r) {
          const Panel& p = rows[r][b];
          const __m256i off =
              _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(offsets(p))), bsums);
          const FVec dd = V::mul(V::set1(p.d), da);
          if constexpr (k2) {
            facc[r][t] = V::fmadd(V::cvt(acc[r][t]), dd, facc[r][t]);
            const FVec dm = V::mul(V::set1(p.dmin), da);
            facc[r][t] = V::fmadd(V::cvt(V::sub_off(V::izero(), off)), dm, facc[r][t]);
          } else {
            facc[r][t] = V::fmadd(V::cvt(V::sub_off(acc[r][t], off)), dd, facc[r][t]);
          }
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) out[r * T + t] = V::hsum(facc[r][t]);
  }

  // d_a times the 32-element sums of each block of tokens [t0, t0 + nt), for tile_k4.
  static void block_sums_k4(const uint8_t* act, size_t act_row_bytes, int64_t t0, int nt, int64_t nb, float* abs) {
    for (int t = 0; t < nt; ++t) {
      const uint8_t* row = act + (t0 + t) * act_row_bytes;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = row + b * kQ8KBytes;
        const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kBsumsOffset));
        const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kBsumsOffset + 16));
        const __m256 s = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm_hadd_epi16(lo, hi)));
        _mm256_store_ps(abs + (t * nb + b) * 8, _mm256_mul_ps(s, _mm256_set1_ps(load_f32(blk))));
      }
    }
  }

  // One R x T tile at panel row r: out[i * T + t].
  template <class Panel, int R, int T>
  static void run_tile(const Panel* panel, int64_t r, int64_t nb, const uint8_t* const* a, const float* abs,
                       float* out) {
    const Panel* rows[R];
    for (int i = 0; i < R; ++i) rows[i] = panel + (r + i) * nb;
    if constexpr (std::is_same_v<Panel, PanelK4>)
      tile_k4<R, T>(rows, nb, a, abs, out);
    else
      tile_k6<Panel, R, T>(rows, nb, a, out);
  }

  // A tile of nr <= R rows, through the instantiation for exactly nr.
  template <class Panel, int T, int R = V::kTileRows>
  static void run_tile_of(int nr, const Panel* panel, int64_t r, int64_t nb, const uint8_t* const* a,
                          const float* abs, float* out) {
    if constexpr (R > 1) {
      if (nr < R) return run_tile_of<Panel, T, R - 1>(nr, panel, r, nb, a, abs, out);
    }
    run_tile<Panel, R, T>(panel, r, nb, a, abs, out);
  }

  template <class Panel, int T>
  static void run_rows(const Panel* panel, int64_t rows, int64_t nb, const uint8_t* const* a, const float* abs,
                       int64_t t0, float* y, int64_t y_stride) {
    float out[V::kTileRows * T];
    for (int64_t r = 0; r < rows; r += V::kTileRows) {
      const int nr = static_cast<int>(std::min<int64_t>(V::kTileRows, rows - r));
      run_tile_of<Panel, T>(nr, panel, r, nb, a, abs, out);
      for (int i = 0; i < nr; ++i)
        for (int t = 0; t < T; ++t) y[(t0 + t) * y_stride + r + i] = out[i * T + t];
    }
  }

  template <class Panel, int T = kTileTokens>
  static void dispatch_rows(int nt, const Panel* panel, int64_t rows, int64_t nb, const uint8_t* const* a,
                            const float* abs, int64_t t0, float* y, int64_t y_stride) {
    if constexpr (T >= 1) {
      if (nt == T) return run_rows<Panel, T>(panel, rows, nb, a, abs, t0, y, y_stride);
      dispatch_rows<Panel, T - 1>(nt, panel, rows, nb, a, abs, t0, y, y_stride);
    }
  }

  // The core: act_q8k.h's panel_gemm_k2_* / panel_gemm_k4_* / panel_gemm_k6_* semantics.
  template <class Panel>
  static void panel_gemm(const Panel* panel, int64_t rows, int64_t nb, const uint8_t* act, size_t act_row_bytes,
                         int64_t n_tokens, float* y, int64_t y_stride) {
    constexpr bool k4 = std::is_same_v<Panel, PanelK4>;
    float* abs = k4 ? static_cast<float*>(q8k_scratch(1, sizeof(float) * 8 * kTileTokens * nb)) : nullptr;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTileTokens) {
      const int nt = static_cast<int>(std::min<int64_t>(kTileTokens, n_tokens - t0));
      const uint8_t* a[kTileTokens];
      for (int t = 0; t < nt; ++t) a[t] = act + (t0 + t) * act_row_bytes;
      if (k4) block_sums_k4(act, act_row_bytes, t0, nt, nb, abs);
      dispatch_rows<Panel>(nt, panel, rows, nb, a, abs, t0, y, y_stride);
    }
  }
};

}  // namespace
}  // namespace th::cpu
