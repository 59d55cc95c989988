// The AVX-512 table: AVX2's entries, but attention in zmm registers. Decode at long
// context is mostly attention (a 1.1B token at 4,096 positions reads 90 MB of K/V besides
// 0.62 GB of weights, yet ran at 56-64% of its speed at 8 positions), and the AVX2 version
// spends ~60 instructions per (q head, position): a 64-element head is 8 ymm FMAs for the
// score and 8 for the weighted sum of V, each with its load, where zmm takes 4 and 4.
// f16 and bf16 K/V rows convert 16 elements per instruction; q8_0 rows go through AVX2's
// conversion. Results match the reference within the same bounds (backend_ops_test); they
// need not equal AVX2's bit for bit, only be the same for a token wherever it is batched.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/flash_attention.h"
#include "backend/cpu/vec_ops.h"

namespace th::cpu {

namespace {

// exp as AVX2's exp8 (Cephes' expf polynomial, kExpMaxRelError), 16 lanes.
inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3365447505531f)), _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
                                        _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

// The first n (< 16) lanes.
inline __mmask16 first(int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }

struct Avx512 {
  static void to_f32(DType t, const void* row, int64_t start, int64_t n, float* dst) {
    const auto* h = static_cast<const uint16_t*>(row) + start;
    if (t == DType::F16 || t == DType::BF16) {
      int64_t i = 0;
      for (; i + 16 <= n; i += 16) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i));
        _mm512_storeu_ps(dst + i, t == DType::F16 ? _mm512_cvtph_ps(v)
                                                  : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16)));
      }
      if (i < n) {
        const __m256i v = _mm256_maskz_loadu_epi16(first(n - i), h + i);
        _mm512_mask_storeu_ps(dst + i, first(n - i),
                              t == DType::F16 ? _mm512_cvtph_ps(v)
                                              : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16)));
      }
      return;
    }
    avx2_vec_ops().to_f32(t, row, start, n, dst);
  }

  // Scores of 8 positions at a time (one accumulator each, then reduced together), the
  // rest one by one; a position's score is computed the same way whenever its token is
  // (the path depends on the tile's length, fixed by the token's position).
  static void dots(const float* q, const float* const* rows, int64_t nt, int64_t hd, float* s) {
    const int64_t body = hd - hd % 16;
    const __mmask16 tail = first(hd - body);
    int64_t j = 0;
    for (; j + 8 <= nt; j += 8) {
      __m512 a[8];
      for (int p = 0; p < 8; ++p) a[p] = _mm512_setzero_ps();
      for (int64_t i = 0; i < body; i += 16) {
        const __m512 qv = _mm512_loadu_ps(q + i);
        for (int p = 0; p < 8; ++p) a[p] = _mm512_fmadd_ps(_mm512_loadu_ps(rows[j + p] + i), qv, a[p]);
      }
      if (body < hd) {
        const __m512 qv = _mm512_maskz_loadu_ps(tail, q + body);
        for (int p = 0; p < 8; ++p) a[p] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, rows[j + p] + body), qv, a[p]);
      }
      // 16 lanes -> 8 (halves added), then AVX2's joint reduction of 8 vectors.
      __m256 b[8];
      for (int p = 0; p < 8; ++p)
        b[p] = _mm256_add_ps(_mm512_castps512_ps256(a[p]), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a[p]), 1)));
      const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(b[0], b[1]), _mm256_hadd_ps(b[2], b[3]));
      const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(b[4], b[5]), _mm256_hadd_ps(b[6], b[7]));
      _mm256_storeu_ps(s + j, _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31)));
    }
    for (; j < nt; ++j) {
      __m512 a = _mm512_setzero_ps();
      for (int64_t i = 0; i < body; i += 16) a = _mm512_fmadd_ps(_mm512_loadu_ps(rows[j] + i), _mm512_loadu_ps(q + i), a);
      if (body < hd)
        a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, rows[j] + body), _mm512_maskz_loadu_ps(tail, q + body), a);
      s[j] = _mm512_reduce_add_ps(a);
    }
  }

  static float exp_sub_sum(float* s, int64_t n, float m) {
    const __m512 mv = _mm512_set1_ps(m);
    __m512 sum = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
      const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + j), mv));
      _mm512_storeu_ps(s + j, e);
      sum = _mm512_add_ps(sum, e);
    }
    if (j < n) {
      const __mmask16 k = first(n - j);
      const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), mv));
      _mm512_mask_storeu_ps(s + j, k, e);
      sum = _mm512_mask_add_ps(sum, k, sum, e);
    }
    return _mm512_reduce_add_ps(sum);
  }

  static float max(const float* s, int64_t n) {
    __m512 m = _mm512_set1_ps(s[0]);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(s + j));
    if (j < n) m = _mm512_mask_max_ps(m, first(n - j), m, _mm512_maskz_loadu_ps(first(n - j), s + j));
    return _mm512_reduce_max_ps(m);
  }

  static void scale(float* y, float c, int64_t n) {
    const __m512 cv = _mm512_set1_ps(c);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), cv));
    if (i < n) _mm512_mask_storeu_ps(y + i, first(n - i), _mm512_mul_ps(_mm512_maskz_loadu_ps(first(n - i), y + i), cv));
  }

  // acc += sum_j w[j] * rows[j]. 64 outputs at a time in 4 zmm, rows taken in pairs into two
  // accumulator sets (8 independent FMA chains; 4 would wait on the FMA latency), added at
  // the end; then 16 at a time, then a masked tail.
  static void weighted_sum(float* acc, const float* w, const float* const* rows, int64_t nt, int64_t hd) {
    int64_t i = 0;
    for (; i + 64 <= hd; i += 64) {
      __m512 a[4], b[4];
      for (int v = 0; v < 4; ++v) a[v] = _mm512_loadu_ps(acc + i + 16 * v), b[v] = _mm512_setzero_ps();
      int64_t j = 0;
      for (; j + 2 <= nt; j += 2) {
        const __m512 w0 = _mm512_set1_ps(w[j]), w1 = _mm512_set1_ps(w[j + 1]);
        const float* r0 = rows[j] + i;
        const float* r1 = rows[j + 1] + i;
        for (int v = 0; v < 4; ++v) {
          a[v] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(r0 + 16 * v), a[v]);
          b[v] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(r1 + 16 * v), b[v]);
        }
      }
      if (j < nt)
        for (int v = 0; v < 4; ++v) a[v] = _mm512_fmadd_ps(_mm512_set1_ps(w[j]), _mm512_loadu_ps(rows[j] + i + 16 * v), a[v]);
      for (int v = 0; v < 4; ++v) _mm512_storeu_ps(acc + i + 16 * v, _mm512_add_ps(a[v], b[v]));
    }
    for (; i < hd; i += 16) {
      const __mmask16 k = first(hd - i < 16 ? hd - i : 16);
      __m512 a = _mm512_maskz_loadu_ps(k, acc + i);
      for (int64_t j = 0; j < nt; ++j) a = _mm512_fmadd_ps(_mm512_set1_ps(w[j]), _mm512_maskz_loadu_ps(k, rows[j] + i), a);
      _mm512_mask_storeu_ps(acc + i, k, a);
    }
  }
};

}  // namespace

const VecOps& avx512_vec_ops() {
  static const VecOps ops = [] {
    VecOps o = avx2_vec_ops();
    o.isa = Isa::Avx512;
    o.attend = &flash_attend_group<Avx512>;
    return o;
  }();
  return ops;
}

}  // namespace th::cpu
