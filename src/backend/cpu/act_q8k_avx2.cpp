// Q8_K conversion and the panel multiply cores with AVX2 (compiled with -mavx2 -mfma;
// called only where available_isas() has Avx2).
//
// The cores compute a 1-row x 4-token register tile over a panel row: per 32-element
// chunk, the row's unpacked weights and scales are loaded once for all four tokens, then
// vpmaddubsw (u8 weight x s8 activation, pairs to int16) and vpmaddwd (x int16 scale,
// pairs to int32) add into one int32 accumulator per token; each block ends with one
// float multiply-add per token (d_w * d_a) plus the folded mins / -32 offset. That is 2
// multiplies per 32 multiply-adds and about 40 instructions per token and 256 weights
// (callgrind), against llama.cpp's per-token loop, which also re-unpacks nibbles, scales
// and mins for every token. Zen 3 issues two of these multiplies per cycle (measured),
// so the multiply bound is 32 multiply-adds per cycle: 203 GOPS at 3.18 GHz; the cores
// reach 120-140 in isolation.
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

float hmax_ps(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

void quantize_block(const float* x, uint8_t* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  // max(|x|, m) returns m when |x| is NaN (vmaxps gives its second operand), so NaNs are
  // skipped exactly as the reference's `ax > amax` skips them.
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < kQKK; i += 8) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask), m);
  const float amax = hmax_ps(m);
  if (amax == 0.0f) {
    std::memset(out, 0, kQ8KBytes);
    return;
  }
  // The reference keeps the first value of largest magnitude; its sign picks the sign of d.
  const __m256 vamax = _mm256_set1_ps(amax);
  int first = 0;
  for (int i = 0; i < kQKK; i += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask), vamax, _CMP_EQ_OQ));
    if (mask != 0) {
      first = i + __builtin_ctz(static_cast<unsigned>(mask));
      break;
    }
  }
  const float iscale = -127.f / x[first];
  const __m256 vs = _mm256_set1_ps(iscale);
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256 lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
  __m256i partial[8];  // per chunk: four partial sums of each 16-element group (lane 0: group 2k, lane 1: 2k+1)
  for (int k = 0; k < 8; ++k) {
    __m256i i32[4];
    for (int v = 0; v < 4; ++v) {
      __m256 f = _mm256_mul_ps(_mm256_loadu_ps(x + 32 * k + 8 * v), vs);
      f = _mm256_and_ps(f, _mm256_cmp_ps(f, f, _CMP_ORD_Q));  // NaN (inf * 0) -> 0, as the reference
      f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);             // +-inf (denormal max) saturate, as the reference
      i32[v] = _mm256_cvtps_epi32(f);                          // round half to even (default MXCSR)
    }
    // Pack to bytes (no saturation left to do) and undo the packs' per-lane order.
    const __m256i i16a = _mm256_packs_epi32(i32[0], i32[1]);
    const __m256i i16b = _mm256_packs_epi32(i32[2], i32[3]);
    const __m256i q = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(i16a, i16b), perm);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + kQsOffset + 32 * k), q);
    partial[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
  }
  // Two rounds of hadd leave, per 128-bit lane, the group sums of four chunks: lane 0 the
  // even groups, lane 1 the odd ones; pack to int16 and interleave the lanes back.
  const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(partial[0], partial[1]), _mm256_hadd_epi32(partial[2], partial[3]));
  const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(partial[4], partial[5]), _mm256_hadd_epi32(partial[6], partial[7]));
  const __m256i s16 = _mm256_packs_epi32(h0, h1);  // lane 0: g0 g2 .. g14, lane 1: g1 g3 .. g15
  const __m128i even = _mm256_castsi256_si128(s16), odd = _mm256_extracti128_si256(s16, 1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + kBsumsOffset), _mm_unpacklo_epi16(even, odd));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + kBsumsOffset + 16), _mm_unpackhi_epi16(even, odd));
  const float d = 1 / iscale;
  std::memcpy(out, &d, sizeof d);
}

// Pins an accumulator to a register at this point: without it GCC 12 sums each iteration's
// products as a tree and shuffles the eight accumulators through extra moves and a spill
// (50 instructions per 256 multiply-adds instead of about 30; callgrind).
inline void keep(__m256i& v) { __asm__("" : "+x"(v)); }

float load_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}

__m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// One R x T tile over all nb blocks; out[r][t] = dot(row r, token t). The cores use R = 1,
// T = 4: the activation vectors go straight into vpmaddubsw as memory operands, so a
// second row saves no loads, while its eight more accumulators (int and float) make GCC
// spill in the per-block epilogue: 1 x 4 ran at 138 GOPS against 2 x 4's 130, 1 x 6's
// 117-143 and 1 x 8's 92-107 (one thread, L1/L2-resident panel, 3.18 GHz Zen 3).
//
// q4_K / q5_K: sum over blocks of d_a * (d_w * S + mins . bsum32), S the integer sum of
// sc[j] * q * a; the mins term comes from `abs` (per token and block: d_a times the eight
// 32-element activation sums, precomputed once per token tile for all rows).
template <int R, int T>
void tile_k4(const PanelK4* const* rows, int64_t nb, const uint8_t* const* act, const float* abs, float* out) {
  __m256 facc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) facc[r][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_si256();
    const uint8_t* qs[T];
    for (int t = 0; t < T; ++t) qs[t] = act[t] + b * kQ8KBytes + kQsOffset;
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      __m256i a[T];
      for (int t = 0; t < T; ++t) a[t] = load256(qs[t] + 32 * k);
      for (int r = 0; r < R; ++r) {
        const PanelK4& p = rows[r][b];
        const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.q + 32 * k));
        int32_t sc2;
        std::memcpy(&sc2, p.sc[k], 4);
        const __m256i sc = _mm256_set1_epi32(sc2);
        for (int t = 0; t < T; ++t) {
          acc[r][t] = _mm256_add_epi32(acc[r][t], _mm256_madd_epi16(_mm256_maddubs_epi16(w, a[t]), sc));
          keep(acc[r][t]);
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      const __m256 da = _mm256_set1_ps(load_f32(act[t] + b * kQ8KBytes));
      const __m256 ab = _mm256_load_ps(abs + (t * nb + b) * 8);
      for (int r = 0; r < R; ++r) {
        const PanelK4& p = rows[r][b];
        const __m256 dd = _mm256_mul_ps(_mm256_set1_ps(p.d), da);
        facc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][t]), dd, facc[r][t]);
        facc[r][t] = _mm256_fmadd_ps(_mm256_load_ps(p.mins), ab, facc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) out[r * T + t] = hsum_ps(facc[r][t]);
}

// q6_K: sum over blocks of d_w * d_a * (S - m32 . bsums), S as above with 16-element
// sub-blocks (each chunk's scale vector holds two scales).
template <int R, int T>
void tile_k6(const PanelK6* const* rows, int64_t nb, const uint8_t* const* act, float* out) {
  __m256 facc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) facc[r][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_si256();
    const uint8_t* qs[T];
    for (int t = 0; t < T; ++t) qs[t] = act[t] + b * kQ8KBytes + kQsOffset;
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      __m256i a[T];
      for (int t = 0; t < T; ++t) a[t] = load256(qs[t] + 32 * k);
      for (int r = 0; r < R; ++r) {
        const PanelK6& p = rows[r][b];
        const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.q + 32 * k));
        const __m256i sc = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.sc[k]));
        for (int t = 0; t < T; ++t) {
          acc[r][t] = _mm256_add_epi32(acc[r][t], _mm256_madd_epi16(_mm256_maddubs_epi16(w, a[t]), sc));
          keep(acc[r][t]);
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      const uint8_t* blk = act[t] + b * kQ8KBytes;
      const __m256 da = _mm256_set1_ps(load_f32(blk));
      const __m256i bsums = load256(blk + kBsumsOffset);
      for (int r = 0; r < R; ++r) {
        const PanelK6& p = rows[r][b];
        const __m256i off = _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(p.m32)), bsums);
        const __m256 dd = _mm256_mul_ps(_mm256_set1_ps(p.d), da);
        facc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(acc[r][t], off)), dd, facc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) out[r * T + t] = hsum_ps(facc[r][t]);
}

constexpr int kTileRows = 1;  // see tile_k4
constexpr int kTileTokens = 4;

// d_a times the 32-element sums of each block of tokens [t0, t0 + nt), for tile_k4.
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

template <class Panel, int T = kTileTokens>
void dispatch_rows(int nt, const Panel* panel, int64_t rows, int64_t nb, const uint8_t* const* a, const float* abs,
                   int64_t t0, float* y, int64_t y_stride) {
  if constexpr (T >= 1) {
    if (nt == T) return run_rows<Panel, T>(panel, rows, nb, a, abs, t0, y, y_stride);
    dispatch_rows<Panel, T - 1>(nt, panel, rows, nb, a, abs, t0, y, y_stride);
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
    dispatch_rows<Panel>(nt, panel, rows, nb, a, abs, t0, y, y_stride);
  }
}

}  // namespace

void quantize_row_q8_k_avx2(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i) quantize_block(x + i * kQKK, out + i * kQ8KBytes);
}

void panel_gemm_k4_avx2(const PanelK4* panel, int64_t rows, int64_t nb, const uint8_t* act, size_t act_row_bytes,
                        int64_t n_tokens, float* y, int64_t y_stride) {
  panel_gemm(panel, rows, nb, act, act_row_bytes, n_tokens, y, y_stride);
}

void panel_gemm_k6_avx2(const PanelK6* panel, int64_t rows, int64_t nb, const uint8_t* act, size_t act_row_bytes,
                        int64_t n_tokens, float* y, int64_t y_stride) {
  panel_gemm(panel, rows, nb, act, act_row_bytes, n_tokens, y, y_stride);
}

}  // namespace th::cpu
