// The panel multiply cores with AVX-512 BW + VNNI (compiled with -mavx512*; called only
// where available_isas() has Avx512). A 2-row x 4-token tile on 64-element vectors:
// vpmaddubsw then vpdpwssd (multiply by the int16 scales and add to the accumulator in
// one instruction), 2 instructions per 64 multiply-adds per (row, token) against AVX2's 3
// per 32. With 32 vector registers all eight int32 accumulators stay in registers through
// a block; GCC keeps the float sums on the stack, one load and store per block.
//
// This machine type (Zen 3) has no AVX-512: these cores are compiled and
// unit-tested only where a CPU runs them (the tests skip otherwise).
// GCC 12's AVX-512 headers build some results from _mm512_undefined_*() and then warn
// that it is uninitialized once inlined (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
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

float load_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}

__m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// Pins an accumulator to a register, as keep() in act_q8k_avx2.cpp: stops GCC from summing
// the products as a tree through spills.
inline void keep(__m512i& v) { __asm__("" : "+v"(v)); }

template <int R, int T>
void tile_k4(const PanelK4* const* rows, int64_t nb, const uint8_t* const* act, const float* abs, float* out) {
  __m512 facc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) facc[r][t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512i acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_si512();
    __m512i sc_all[R];  // the row's eight (sc, sc) dwords in the low 256 bits
    for (int r = 0; r < R; ++r)
      sc_all[r] = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r][b].sc)));
#pragma GCC unroll 4
    for (int kk = 0; kk < 4; ++kk) {  // 64 elements: sub-blocks 2kk, 2kk + 1
      __m512i a[T];
      for (int t = 0; t < T; ++t) a[t] = load512(act[t] + b * kQ8KBytes + kQsOffset + 64 * kk);
      const __m512i idx = _mm512_set_epi32(2 * kk + 1, 2 * kk + 1, 2 * kk + 1, 2 * kk + 1, 2 * kk + 1, 2 * kk + 1,
                                           2 * kk + 1, 2 * kk + 1, 2 * kk, 2 * kk, 2 * kk, 2 * kk, 2 * kk, 2 * kk,
                                           2 * kk, 2 * kk);
      for (int r = 0; r < R; ++r) {
        const __m512i w = load512(rows[r][b].q + 64 * kk);
        const __m512i sc = _mm512_permutexvar_epi32(idx, sc_all[r]);
        for (int t = 0; t < T; ++t) {
          acc[r][t] = _mm512_dpwssd_epi32(acc[r][t], _mm512_maddubs_epi16(w, a[t]), sc);
          keep(acc[r][t]);
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      const __m512 da = _mm512_set1_ps(load_f32(act[t] + b * kQ8KBytes));
      const __m512 ab = _mm512_zextps256_ps512(_mm256_load_ps(abs + (t * nb + b) * 8));
      for (int r = 0; r < R; ++r) {
        const PanelK4& p = rows[r][b];
        const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(p.d), da);
        facc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][t]), dd, facc[r][t]);
        facc[r][t] = _mm512_fmadd_ps(_mm512_zextps256_ps512(_mm256_load_ps(p.mins)), ab, facc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) out[r * T + t] = _mm512_reduce_add_ps(facc[r][t]);
}

template <int R, int T>
void tile_k6(const PanelK6* const* rows, int64_t nb, const uint8_t* const* act, float* out) {
  __m512 facc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) facc[r][t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512i acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int kk = 0; kk < 4; ++kk) {
      __m512i a[T];
      for (int t = 0; t < T; ++t) a[t] = load512(act[t] + b * kQ8KBytes + kQsOffset + 64 * kk);
      for (int r = 0; r < R; ++r) {
        const PanelK6& p = rows[r][b];
        const __m512i w = load512(p.q + 64 * kk);
        const __m512i sc = load512(p.sc[2 * kk]);  // chunks 2kk and 2kk + 1, adjacent
        for (int t = 0; t < T; ++t) {
          acc[r][t] = _mm512_dpwssd_epi32(acc[r][t], _mm512_maddubs_epi16(w, a[t]), sc);
          keep(acc[r][t]);
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      const uint8_t* blk = act[t] + b * kQ8KBytes;
      const __m512 da = _mm512_set1_ps(load_f32(blk));
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kBsumsOffset));
      for (int r = 0; r < R; ++r) {
        const PanelK6& p = rows[r][b];
        const __m256i off = _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(p.m32)), bsums);
        const __m512i s = _mm512_sub_epi32(acc[r][t], _mm512_zextsi256_si512(off));
        facc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(_mm512_set1_ps(p.d), da), facc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) out[r * T + t] = _mm512_reduce_add_ps(facc[r][t]);
}

constexpr int kTileRows = 2;
constexpr int kTileTokens = 4;

void block_sums_k4(const uint8_t* act, size_t act_row_bytes, int64_t t0, int nt, int64_t nb, float* abs) {
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

template <class Panel, int R, int T>
void run_tile(const Panel* panel, int64_t r, int64_t nb, const uint8_t* const* a, const float* abs, float* out) {
  const Panel* rows[R];
  for (int i = 0; i < R; ++i) rows[i] = panel + (r + i) * nb;
  if constexpr (std::is_same_v<Panel, PanelK4>)
    tile_k4<R, T>(rows, nb, a, abs, out);
  else
    tile_k6<R, T>(rows, nb, a, out);
}

template <class Panel, int T>
void run_rows(const Panel* panel, int64_t rows, int64_t nb, const uint8_t* const* a, const float* abs, int64_t t0,
              float* y, int64_t y_stride) {
  float out[kTileRows * T];
  for (int64_t r = 0; r < rows; r += kTileRows) {
    const int nr = static_cast<int>(std::min<int64_t>(kTileRows, rows - r));
    if (nr == 2)
      run_tile<Panel, 2, T>(panel, r, nb, a, abs, out);
    else
      run_tile<Panel, 1, T>(panel, r, nb, a, abs, out);
    for (int i = 0; i < nr; ++i)
      for (int t = 0; t < T; ++t) y[(t0 + t) * y_stride + r + i] = out[i * T + t];
  }
}

template <class Panel>
void panel_gemm(const Panel* panel, int64_t rows, int64_t nb, const uint8_t* act, size_t act_row_bytes,
                int64_t n_tokens, float* y, int64_t y_stride) {
  constexpr bool k4 = std::is_same_v<Panel, PanelK4>;
  float* abs = k4 ? static_cast<float*>(q8k_scratch(1, sizeof(float) * 8 * kTileTokens * nb)) : nullptr;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTileTokens) {
    const int nt = static_cast<int>(std::min<int64_t>(kTileTokens, n_tokens - t0));
    const uint8_t* a[kTileTokens];
    for (int t = 0; t < nt; ++t) a[t] = act + (t0 + t) * act_row_bytes;
    if (k4) block_sums_k4(act, act_row_bytes, t0, nt, nb, abs);
    switch (nt) {
      case 4: run_rows<Panel, 4>(panel, rows, nb, a, abs, t0, y, y_stride); break;
      case 3: run_rows<Panel, 3>(panel, rows, nb, a, abs, t0, y, y_stride); break;
      case 2: run_rows<Panel, 2>(panel, rows, nb, a, abs, t0, y, y_stride); break;
      default: run_rows<Panel, 1>(panel, rows, nb, a, abs, t0, y, y_stride); break;
    }
  }
}

}  // namespace

void panel_gemm_k4_avx512(const PanelK4* panel, int64_t rows, int64_t nb, const uint8_t* act,
                          size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  panel_gemm(panel, rows, nb, act, act_row_bytes, n_tokens, y, y_stride);
}

void panel_gemm_k6_avx512(const PanelK6* panel, int64_t rows, int64_t nb, const uint8_t* act,
                          size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  panel_gemm(panel, rows, nb, act, act_row_bytes, n_tokens, y, y_stride);
}

}  // namespace th::cpu
