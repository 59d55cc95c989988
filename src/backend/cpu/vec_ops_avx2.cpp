// The vector primitives with AVX2, FMA and F16C (compiled with -mavx2 -mfma
// -mf16c; the backend calls them only when the CPU has all three).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>

#include "backend/cpu/flash_attention.h"
#include "backend/cpu/vec_ops.h"
#include "tensor/half.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// exp(x) for 8 lanes: Cephes' expf (x = n ln2 + r, |r| <= ln2 / 2, a degree-6
// polynomial for e^r, times 2^n built in the exponent bits). Inputs are clamped
// to [-87.3, 88]: below, the result would be subnormal (returned as ~0); above,
// it would overflow.
inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3365447505531f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  // r = x - n ln2, with ln2 split in a part exact in 9 bits and the rest.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

inline float exp1(float x) {
  alignas(32) float v[8] = {x};
  _mm256_store_ps(v, exp8(_mm256_load_ps(v)));
  return v[0];
}

// One dot product in a fixed order: two 8-lane accumulators over 16-element steps,
// one more 8-element step, the lanes summed, then a scalar fma tail. dot4 repeats
// exactly this per row, so a result never depends on which kernel computed it.
inline float dot1(const float* w, const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
  }
  if (i + 8 <= n) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
    i += 8;
  }
  float s = hsum(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) s = std::fma(w[i], x[i], s);
  return s;
}

// Four rows against one x: x loaded once for four rows, eight independent
// accumulators (FMA latency 4 x 2 pipes on Zen 3 needs 8 in flight).
inline void dot4(const float* w0, const float* w1, const float* w2, const float* w3, const float* x, int64_t n,
                 float* out) {
  __m256 a00 = _mm256_setzero_ps(), a01 = _mm256_setzero_ps(), a10 = _mm256_setzero_ps(), a11 = _mm256_setzero_ps();
  __m256 a20 = _mm256_setzero_ps(), a21 = _mm256_setzero_ps(), a30 = _mm256_setzero_ps(), a31 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
    a00 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + i), x0, a00);
    a01 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + i + 8), x1, a01);
    a10 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + i), x0, a10);
    a11 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + i + 8), x1, a11);
    a20 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + i), x0, a20);
    a21 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + i + 8), x1, a21);
    a30 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + i), x0, a30);
    a31 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + i + 8), x1, a31);
  }
  if (i + 8 <= n) {
    const __m256 x0 = _mm256_loadu_ps(x + i);
    a00 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + i), x0, a00);
    a10 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + i), x0, a10);
    a20 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + i), x0, a20);
    a30 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + i), x0, a30);
    i += 8;
  }
  float s0 = hsum(_mm256_add_ps(a00, a01)), s1 = hsum(_mm256_add_ps(a10, a11));
  float s2 = hsum(_mm256_add_ps(a20, a21)), s3 = hsum(_mm256_add_ps(a30, a31));
  for (; i < n; ++i) {
    s0 = std::fma(w0[i], x[i], s0);
    s1 = std::fma(w1[i], x[i], s1);
    s2 = std::fma(w2[i], x[i], s2);
    s3 = std::fma(w3[i], x[i], s3);
  }
  out[0] = s0;
  out[1] = s1;
  out[2] = s2;
  out[3] = s3;
}

struct Avx2 {
  static void to_f32(DType t, const void* row, int64_t start, int64_t n, float* dst) {
    const auto* p = static_cast<const uint8_t*>(row);
    switch (t) {
      case DType::F32:
        std::memcpy(dst, p + start * 4, static_cast<size_t>(n) * 4);
        return;
      case DType::F16: {
        const uint8_t* src = p + start * 2;
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
          _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * 2))));
        for (; i < n; ++i) {
          uint16_t h;
          std::memcpy(&h, src + i * 2, 2);
          dst[i] = _cvtsh_ss(h);
        }
        return;
      }
      case DType::BF16: {
        const uint8_t* src = p + start * 2;
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
          const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * 2)));
          _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
        }
        for (; i < n; ++i) {
          uint16_t h;
          std::memcpy(&h, src + i * 2, 2);
          dst[i] = bf16_to_f32(h);
        }
        return;
      }
      case DType::Q8_0: {
        int64_t e = start;
        const int64_t end = start + n;
        auto one = [&](int64_t k) {
          const uint8_t* blk = p + k / kQK * sizeof(BlockQ8_0);
          uint16_t d;
          std::memcpy(&d, blk, 2);
          dst[k - start] = static_cast<float>(static_cast<int8_t>(blk[2 + k % kQK])) * _cvtsh_ss(d);
        };
        for (; e < end && e % kQK != 0; ++e) one(e);
        for (; e + kQK <= end; e += kQK) {
          const uint8_t* blk = p + e / kQK * sizeof(BlockQ8_0);
          uint16_t dh;
          std::memcpy(&dh, blk, 2);
          const __m256 d = _mm256_set1_ps(_cvtsh_ss(dh));
          for (int k = 0; k < kQK; k += 8) {
            const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + k));
            const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
            _mm256_storeu_ps(dst + (e - start) + k, _mm256_mul_ps(q, d));
          }
        }
        for (; e < end; ++e) one(e);
        return;
      }
      default: {
        const DTypeInfo& info = dtype_info(t);
        dequantize_row(t, p + static_cast<size_t>(start) / info.block_size * info.type_size, dst, n);
        return;
      }
    }
  }

  // Attention scores: 8 positions at a time when hd is a multiple of 8 (one accumulator per
  // position, the 8 reduced together: 9 shuffles and adds where 8 separate horizontal sums
  // take 40), else 4 as dot4. A position's score is computed the same way whenever its
  // token is (the path depends on the tile's length, fixed by the token's position).
  static void dots(const float* q, const float* const* rows, int64_t nt, int64_t hd, float* s) {
    int64_t j = 0;
    if (hd % 8 == 0)
      for (; j + 8 <= nt; j += 8) {
        __m256 a[8];
        for (int p = 0; p < 8; ++p) a[p] = _mm256_setzero_ps();
        for (int64_t i = 0; i < hd; i += 8) {
          const __m256 qv = _mm256_loadu_ps(q + i);
          for (int p = 0; p < 8; ++p) a[p] = _mm256_fmadd_ps(_mm256_loadu_ps(rows[j + p] + i), qv, a[p]);
        }
        const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
        const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
        _mm256_storeu_ps(s + j, _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31)));
      }
    for (; j + 4 <= nt; j += 4) dot4(rows[j], rows[j + 1], rows[j + 2], rows[j + 3], q, hd, s + j);
    for (; j < nt; ++j) s[j] = dot1(rows[j], q, hd);
  }

  static float exp_sub_sum(float* s, int64_t n, float m) {
    const __m256 mv = _mm256_set1_ps(m);
    __m256 sum = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
      _mm256_storeu_ps(s + j, e);
      sum = _mm256_add_ps(sum, e);
    }
    float total = hsum(sum);
    for (; j < n; ++j) {
      s[j] = exp1(s[j] - m);
      total += s[j];
    }
    return total;
  }

  // The largest of s[0..n), n >= 1; four vectors at a time (a scalar max chain was 7% of the
  // attention time at 4,096 positions).
  static float max(const float* s, int64_t n) {
    int64_t j = 0;
    float best = s[0];
    if (n >= 32) {
      __m256 m0 = _mm256_loadu_ps(s), m1 = _mm256_loadu_ps(s + 8), m2 = _mm256_loadu_ps(s + 16), m3 = _mm256_loadu_ps(s + 24);
      for (j = 32; j + 32 <= n; j += 32) {
        m0 = _mm256_max_ps(m0, _mm256_loadu_ps(s + j));
        m1 = _mm256_max_ps(m1, _mm256_loadu_ps(s + j + 8));
        m2 = _mm256_max_ps(m2, _mm256_loadu_ps(s + j + 16));
        m3 = _mm256_max_ps(m3, _mm256_loadu_ps(s + j + 24));
      }
      const __m256 mv = _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3));
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, mv);
      for (float x : lanes) best = std::max(best, x);
    }
    for (; j < n; ++j) best = std::max(best, s[j]);
    return best;
  }

  static void scale(float* y, float c, int64_t n) {
    const __m256 cv = _mm256_set1_ps(c);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), cv));
    for (; i < n; ++i) y[i] *= c;
  }

  // acc += sum_j w[j] * rows[j], 64 outputs at a time held in registers across all rows,
  // then 32, 8, 1. Each output adds its rows in order, whichever width took it. At 64, a
  // row is 8 independent FMAs: with 32 (4 chains of FMA latency 4, one row after another)
  // this loop was half of the attention time at 4,096 positions (perf, 1.1B decode).
  static void weighted_sum(float* acc, const float* w, const float* const* rows, int64_t nt, int64_t hd) {
    int64_t i = 0;
    for (; i + 64 <= hd; i += 64) {
      __m256 a[8];
      for (int v = 0; v < 8; ++v) a[v] = _mm256_loadu_ps(acc + i + 8 * v);
      for (int64_t j = 0; j < nt; ++j) {
        const __m256 wj = _mm256_set1_ps(w[j]);
        const float* r = rows[j] + i;
        for (int v = 0; v < 8; ++v) a[v] = _mm256_fmadd_ps(wj, _mm256_loadu_ps(r + 8 * v), a[v]);
      }
      for (int v = 0; v < 8; ++v) _mm256_storeu_ps(acc + i + 8 * v, a[v]);
    }
    for (; i + 32 <= hd; i += 32) {
      __m256 a0 = _mm256_loadu_ps(acc + i), a1 = _mm256_loadu_ps(acc + i + 8);
      __m256 a2 = _mm256_loadu_ps(acc + i + 16), a3 = _mm256_loadu_ps(acc + i + 24);
      for (int64_t j = 0; j < nt; ++j) {
        const __m256 wj = _mm256_set1_ps(w[j]);
        const float* r = rows[j] + i;
        a0 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(r), a0);
        a1 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(r + 8), a1);
        a2 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(r + 16), a2);
        a3 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(r + 24), a3);
      }
      _mm256_storeu_ps(acc + i, a0);
      _mm256_storeu_ps(acc + i + 8, a1);
      _mm256_storeu_ps(acc + i + 16, a2);
      _mm256_storeu_ps(acc + i + 24, a3);
    }
    for (; i + 8 <= hd; i += 8) {
      __m256 a0 = _mm256_loadu_ps(acc + i);
      for (int64_t j = 0; j < nt; ++j) a0 = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), _mm256_loadu_ps(rows[j] + i), a0);
      _mm256_storeu_ps(acc + i, a0);
    }
    for (; i < hd; ++i) {
      float a = acc[i];
      for (int64_t j = 0; j < nt; ++j) a = std::fma(w[j], rows[j][i], a);
      acc[i] = a;
    }
  }
};

void gemm_f32(const float* w, int64_t w_stride, int64_t n_rows, const float* x, int64_t x_stride, int64_t n_tokens,
              int64_t cols, float* y, int64_t y_stride) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * x_stride;
    float* yt = y + t * y_stride;
    int64_t r = 0;
    for (; r + 4 <= n_rows; r += 4) {
      const float* wr = w + r * w_stride;
      dot4(wr, wr + w_stride, wr + 2 * w_stride, wr + 3 * w_stride, xt, cols, yt + r);
    }
    for (; r < n_rows; ++r) yt[r] = dot1(w + r * w_stride, xt, cols);
  }
}

void rmsnorm(const float* x, const float* weight, float* y, int64_t n, float eps) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    a0 = _mm256_fmadd_ps(v0, v0, a0);
    a1 = _mm256_fmadd_ps(v1, v1, a1);
  }
  float ss = hsum(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  const __m256 sv = _mm256_set1_ps(scale);
  i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), sv), _mm256_loadu_ps(weight + i)));
  for (; i < n; ++i) y[i] = x[i] * scale * weight[i];
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + exp1(-gate[i])) * up[i];
}

void exp_f32(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = exp1(x[i]);
}

// vcvtps2ph rounds to nearest even as f32_to_f16 does; only a NaN's bits differ (it keeps
// the payload), so a vector holding one takes the reference's conversion.
void to_f16(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(src + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)) != 0) {
      quantize_row(DType::F16, src + i, out + 2 * i, 8);
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    }
  }
  if (i < n) quantize_row(DType::F16, src + i, out + 2 * i, n - i);
}

// ---------------------------------------------------------------- heads in lanes
// vec_ops_avx512.cpp's decode attention with the group's heads in the vector lanes, in 8
// lanes: groups of 5 to 8 heads take a lane each (P = 1 position per vector: K needs no
// reordering, a score vector is one FMA per dimension with K[p][d] broadcast), groups of 3
// or 4 two lanes each (P = 2: pairs of rows interleaved, 4 shuffles per 8 elements of two
// rows). f32/f16/bf16 K/V, heads a multiple of 8 long, no soft-cap; the rest takes
// flash_attend_span.

template <int P>
inline __m256 broadcast_chunk8(const float* p) {
  if constexpr (P == 1) {
    return _mm256_broadcast_ss(p);
  } else {
    double d;
    std::memcpy(&d, p, sizeof d);
    return _mm256_castpd_ps(_mm256_set1_pd(d));
  }
}

// Elements i..i+7 of a K/V row as f32.
template <DType E>
inline __m256 kv8(const uint8_t* row, int64_t i) {
  if constexpr (E == DType::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + i));
    if constexpr (E == DType::BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
    return _mm256_cvtph_ps(v);
  }
}

struct LaneJob8 {
  const uint8_t* const* k_rows;  // the tile's K/V rows
  const uint8_t* const* v_rows;
  float* qi;   // [hd][8]: lane L = q[head L / P][d] * scale (0 for padding heads)
  float* ki;   // [tile / P][hd][P]
  float* e;    // [tile / P][8] scores, then weights
  float* acc;  // [GP][hd] unnormalized outputs
  int64_t first, hd;
};

// Rows [0, n) (n <= P) into chunk layout at dst; rows n.. are zero.
template <int P, DType E>
inline void pack_chunk8(const uint8_t* const* rows, int64_t n, const LaneJob8& j, float* dst) {
  for (int64_t i = 0; i < j.hd; i += 8) {
    const __m256 a = n > 0 ? kv8<E>(rows[0], j.first + i) : _mm256_setzero_ps();
    if constexpr (P == 1) {
      _mm256_store_ps(dst + i, a);
    } else {
      const __m256 b = n > 1 ? kv8<E>(rows[1], j.first + i) : _mm256_setzero_ps();
      const __m256 lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b);  // a0 b0 a1 b1 | a4 b4 a5 b5
      _mm256_store_ps(dst + 2 * i, _mm256_permute2f128_ps(lo, hi, 0x20));
      _mm256_store_ps(dst + 2 * i + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
  }
}

template <int GP, int NV, DType E>
void weigh_values8(const LaneJob8& j, int64_t nt, const float* corr) {
  constexpr int P = 8 / GP;
  for (int64_t dc = 0; dc < j.hd; dc += 8 * NV) {
    const int nv = static_cast<int>(std::min<int64_t>(NV, (j.hd - dc) / 8));
    __m256 a[GP][NV];
    for (int g = 0; g < GP; ++g) {
      const __m256 c = _mm256_set1_ps(corr[g * P]);
      for (int v = 0; v < NV; ++v)
        a[g][v] = v < nv ? _mm256_mul_ps(_mm256_load_ps(j.acc + g * j.hd + dc + 8 * v), c) : _mm256_setzero_ps();
    }
    for (int64_t p = 0; p < nt; ++p) {
      const float* w = j.e + (p / P) * 8 + p % P;
      __m256 x[NV];
      for (int v = 0; v < NV; ++v) x[v] = v < nv ? kv8<E>(j.v_rows[p], j.first + dc + 8 * v) : _mm256_setzero_ps();
      for (int g = 0; g < GP; ++g) {
        const __m256 wg = _mm256_broadcast_ss(w + g * P);
        for (int v = 0; v < NV; ++v) a[g][v] = _mm256_fmadd_ps(wg, x[v], a[g][v]);
      }
    }
    for (int g = 0; g < GP; ++g)
      for (int v = 0; v < nv; ++v) _mm256_store_ps(j.acc + g * j.hd + dc + 8 * v, a[g][v]);
  }
}

template <int P>
inline __m256 max_over_chunk8(__m256 x) {
  if constexpr (P == 2) x = _mm256_max_ps(x, _mm256_permute_ps(x, 0xB1));  // swap lane pairs
  return x;
}

template <int GP, DType E>
void lanes_tile8(const LaneJob8& j, int64_t nt, __m256& m, __m256& l) {
  constexpr int P = 8 / GP;
  constexpr int NB = 8;  // chunks scored together: 8 FMA chains, 8 + 2 of 16 ymm registers
  constexpr int NV = GP == 8 ? 1 : 2;
  const int64_t n_chunks = (nt + P * NB - 1) / (P * NB) * NB;
  const int64_t chunk_floats = j.hd * P;
  for (int64_t c = 0; c < n_chunks; ++c)
    pack_chunk8<P, E>(j.k_rows + c * P, std::min<int64_t>(P, nt - c * P), j, j.ki + c * chunk_floats);
  const __m256i pos = P == 2 ? _mm256_setr_epi32(0, 1, 0, 1, 0, 1, 0, 1) : _mm256_setzero_si256();
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 mx = neg_inf;
  for (int64_t c0 = 0; c0 < n_chunks; c0 += NB) {
    __m256 s[NB];
    for (int b = 0; b < NB; ++b) s[b] = _mm256_setzero_ps();
    const float* kc = j.ki + c0 * chunk_floats;
    for (int64_t d = 0; d < j.hd; ++d) {
      const __m256 qv = _mm256_load_ps(j.qi + d * 8);
      for (int b = 0; b < NB; ++b) s[b] = _mm256_fmadd_ps(qv, broadcast_chunk8<P>(kc + b * chunk_floats + d * P), s[b]);
    }
    for (int b = 0; b < NB; ++b) {
      // lane valid when its position (c0 + b) * P + L % P < nt
      const __m256i at = _mm256_add_epi32(pos, _mm256_set1_epi32(static_cast<int>((c0 + b) * P)));
      const __m256 valid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(nt)), at));
      const __m256 sb = _mm256_blendv_ps(neg_inf, s[b], valid);
      _mm256_store_ps(j.e + (c0 + b) * 8, sb);
      mx = _mm256_max_ps(mx, sb);
    }
  }
  const __m256 m_new = _mm256_max_ps(m, max_over_chunk8<P>(mx));
  const __m256 corr = exp8(_mm256_sub_ps(m, m_new));  // exp(-87.3) times zeros on the first tile
  m = m_new;
  __m256 sum = _mm256_setzero_ps();
  for (int64_t c = 0; c < n_chunks; ++c) {
    const __m256 sc = _mm256_load_ps(j.e + c * 8);
    const __m256 w = _mm256_and_ps(_mm256_cmp_ps(sc, neg_inf, _CMP_NEQ_OQ), exp8(_mm256_sub_ps(sc, m)));
    _mm256_store_ps(j.e + c * 8, w);
    sum = _mm256_add_ps(sum, w);
  }
  l = _mm256_fmadd_ps(l, corr, sum);
  alignas(32) float cs[8];
  _mm256_store_ps(cs, corr);
  weigh_values8<GP, NV, E>(j, nt, cs);
}

template <int GP, DType E>
void lanes_span8(const AttentionTask& a, int64_t t, int64_t p_lo, int64_t p_hi, AttentionScratch& sc, float* part) {
  constexpr int P = 8 / GP;
  const KvLayerView& kv = *a.kv;
  const AttentionBatch& b = *a.batch;
  const int64_t group = a.n_heads / a.n_kv_heads, n_kv = a.n_kv_heads, hd = a.head_dim;
  const int64_t step = P * 8, tile = std::max<int64_t>(step, 4096 / hd / step * step);
  const std::span<const int32_t> table = b.seq_tables[static_cast<size_t>(b.token_seq[t])];
  const size_t rb = kv.row_bytes();
  const auto* k_pool = static_cast<const uint8_t*>(kv.k);
  const auto* v_pool = static_cast<const uint8_t*>(kv.v);
  const int64_t n_q = hd * 8, n_acc = GP * hd, per_head = n_q + n_acc + 16, n_k = tile * hd, n_e = tile / P * 8;
  sc.floats.resize(static_cast<size_t>(n_kv * per_head + n_k + n_e + 8));
  sc.kv_rows.resize(static_cast<size_t>(2 * tile));
  float* base = sc.floats.data();
  base += (32 - reinterpret_cast<uintptr_t>(base) % 32) % 32 / sizeof(float);
  float* ki = base + n_kv * per_head;
  const uint8_t** k_rows = sc.kv_rows.data();
  const uint8_t** v_rows = k_rows + tile;
  auto job = [&](int64_t h) {
    float* hb = base + h * per_head;
    return LaneJob8{k_rows, v_rows, hb, ki, ki + n_k, hb + n_q, h * hd, hd};
  };
  for (int64_t h = 0; h < n_kv; ++h) {
    const LaneJob8 j = job(h);
    const float* q = a.q + (t * a.n_heads + h * group) * hd;
    for (int64_t d = 0; d < hd; ++d)
      for (int L = 0; L < 8; ++L) j.qi[d * 8 + L] = L / P < group ? q[(L / P) * hd + d] * a.scale : 0.0f;
    std::fill(j.acc, j.acc + n_acc, 0.0f);
    std::fill(j.acc + n_acc, j.acc + n_acc + 8, -std::numeric_limits<float>::infinity());
    std::fill(j.acc + n_acc + 8, j.acc + n_acc + 16, 0.0f);
  }
  for (int64_t p0 = p_lo; p0 < p_hi; p0 += tile) {
    const int64_t nt = std::min(tile, p_hi - p0);
    int64_t blk = p0 / b.block_size, off = p0 % b.block_size;
    for (int64_t r = 0; r < nt; ++r, ++off) {
      if (off == b.block_size) off = 0, ++blk;
      const size_t at = static_cast<size_t>(static_cast<int64_t>(table[static_cast<size_t>(blk)]) * b.block_size + off) * rb;
      k_rows[r] = k_pool + at;
      v_rows[r] = v_pool + at;
    }
    for (int64_t h = 0; h < n_kv; ++h) {
      const LaneJob8 j = job(h);
      float* ml = j.acc + n_acc;
      __m256 m = _mm256_load_ps(ml), l = _mm256_load_ps(ml + 8);
      lanes_tile8<GP, E>(j, nt, m, l);
      _mm256_store_ps(ml, m);
      _mm256_store_ps(ml + 8, l);
    }
  }
  for (int64_t h = 0; h < n_kv; ++h) {
    const LaneJob8 j = job(h);
    const float* ml = j.acc + n_acc;
    for (int64_t g = 0; g < group; ++g) {
      float* pp = part + (h * group + g) * (hd + 2);
      pp[0] = ml[g * P];
      pp[1] = P == 2 ? ml[8 + g * P] + ml[8 + g * P + 1] : ml[8 + g];
      std::copy(j.acc + g * hd, j.acc + g * hd + hd, pp + 2);
    }
  }
}

template <DType E>
void lanes_span8_of(const AttentionTask& a, int64_t t, int64_t p_lo, int64_t p_hi, AttentionScratch& sc, float* part) {
  if (a.n_heads / a.n_kv_heads <= 4) return lanes_span8<4, E>(a, t, p_lo, p_hi, sc, part);
  lanes_span8<8, E>(a, t, p_lo, p_hi, sc, part);
}

void attend_span(const AttentionTask& a, int64_t t, int64_t p_lo, int64_t p_hi, AttentionScratch& sc, float* part) {
  const int64_t group = a.n_kv_heads > 0 ? a.n_heads / a.n_kv_heads : 0;
  const DType e = a.kv->type;
  const bool lanes_kv = e == DType::F32 || e == DType::F16 || e == DType::BF16;
  if (!lanes_kv || a.softcap != 0.0f || group < 3 || group > 8 || a.head_dim % 8 != 0)
    return flash_attend_span<Avx2>(a, t, p_lo, p_hi, sc, part);
  switch (e) {
    case DType::F32: return lanes_span8_of<DType::F32>(a, t, p_lo, p_hi, sc, part);
    case DType::BF16: return lanes_span8_of<DType::BF16>(a, t, p_lo, p_hi, sc, part);
    default: return lanes_span8_of<DType::F16>(a, t, p_lo, p_hi, sc, part);
  }
}

}  // namespace

const VecOps& avx2_vec_ops() {
  static const VecOps ops = {Isa::Avx2, &Avx2::to_f32, &gemm_f32, &rmsnorm, &swiglu, &exp_f32,
                             &attend_span, &to_f16};
  return ops;
}

}  // namespace th::cpu
