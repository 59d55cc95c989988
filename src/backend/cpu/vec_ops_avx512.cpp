// The AVX-512 table: AVX2's entries, but attention and SwiGLU in zmm registers. Decode at long
// context is mostly attention (a 1.1B token at 4,096 positions reads 90 MB of K/V besides
// 0.62 GB of weights, yet ran at 56-64% of its speed at 8 positions), and the AVX2 version
// spends ~60 instructions per (q head, position): a 64-element head is 8 ymm FMAs for the
// score and 8 for the weighted sum of V, each with its load, where zmm takes 4 and 4.
// f16 and bf16 K/V rows convert 16 elements per instruction; q8_0 rows go through AVX2's
// conversion. Results match the reference within the same bounds (backend_ops_test); they
// need not equal AVX2's bit for bit, only be the same for a token wherever it is batched
// (SwiGLU's do equal AVX2's).
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <span>

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

// ---------------------------------------------------------------- heads in lanes
// Decode attention with the q heads of a group in the lanes (f32/f16/bf16 K/V, groups
// of 3 or more heads, no soft-cap; the rest takes flash_attend_span with the primitives above). With GP heads
// (the group rounded up to a power of two) a score vector holds P = 16 / GP positions
// of every head: lane L is head L / P at position L % P of a chunk of P positions. A
// chunk's K is stored as [dim][P] floats, so the scores of 16 (head, position) pairs are
// one FMA per dimension, q's dimension in the lanes times the chunk's P values of K for
// that dimension broadcast: no horizontal sums (the AVX-512 dots above spend ~3 shuffles
// per score on them), and exp runs on 16 scores at a time. Storing K that way costs
// log2(P) permutes per 16 elements of a row, shared by the group's heads: 1/2 per (head,
// position) for TinyLlama's 8 heads of 64.

// The P floats at p repeated over the 16 lanes (one load; broadcasts of 8 and 16 bytes
// and 16 and 32 are load-port operations).
template <int P>
inline __m512 broadcast_chunk(const float* p) {
  if constexpr (P == 1) {
    return _mm512_set1_ps(*p);
  } else if constexpr (P == 2) {
    double d;
    std::memcpy(&d, p, sizeof d);
    return _mm512_castpd_ps(_mm512_set1_pd(d));
  } else if constexpr (P == 4) {
    return _mm512_broadcast_f32x4(_mm_load_ps(p));
  } else if constexpr (P == 8) {
    return _mm512_broadcast_f32x8(_mm256_load_ps(p));
  } else {
    return _mm512_load_ps(p);
  }
}

// Elements i..i+15 of a K/V row (the lanes of k) as f32.
template <DType E>
inline __m512 kv16(const uint8_t* row, int64_t i, __mmask16 k) {
  if constexpr (E == DType::F32) {
    return _mm512_maskz_loadu_ps(k, reinterpret_cast<const float*>(row) + i);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(k, reinterpret_cast<const uint16_t*>(row) + i);
    if constexpr (E == DType::BF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
  }
}

// The first n lanes, n clamped to [0, 16].
inline __mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : first(n); }

// v[r] = elements e..e+15 of row r < P -> v[o] lane L = row L % P, element e + 16 / P * o + L / P:
// log2(P) perfect shuffles of the P vectors as one sequence (each rotates the index bits by one).
template <int P>
inline void interleave_rows(__m512 (&v)[P]) {
  if constexpr (P > 1) {
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    for (int stage = 1; stage < P; stage <<= 1) {
      __m512 n[P];
      for (int k = 0; k < P / 2; ++k) {
        n[2 * k] = _mm512_permutex2var_ps(v[k], lo, v[k + P / 2]);
        n[2 * k + 1] = _mm512_permutex2var_ps(v[k], hi, v[k + P / 2]);
      }
      for (int k = 0; k < P; ++k) v[k] = n[k];
    }
  }
}

// Lane L <- the max (or sum) of the P lanes of its head.
template <int P, bool kSum>
inline __m512 across_chunk(__m512 x) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int s = 1; s < P; s <<= 1) {
    const __m512 y = _mm512_permutexvar_ps(_mm512_xor_si512(iota, _mm512_set1_epi32(s)), x);
    x = kSum ? _mm512_add_ps(x, y) : _mm512_max_ps(x, y);
  }
  return x;
}

// One token's view of one KV head, and where its working arrays live (64-byte aligned).
struct LaneJob {
  const uint8_t* const* k_rows;  // the tile's K/V rows
  const uint8_t* const* v_rows;
  float* qi;   // [hd][16]: lane L = q[head L / P][d] * scale (0 for padding heads)
  float* ki;   // [tile / P][hd16][P]
  float* e;    // [tile / P][16] scores, then weights
  float* acc;  // [GP][hd16] unnormalized outputs
  int64_t first;  // the head's first element within a row
  int64_t hd, hd16;
};

// Rows [0, n) of the tile (n <= P) into chunk layout; rows n.. are zero.
template <int P, DType E>
inline void pack_chunk(const uint8_t* const* rows, int64_t n, const LaneJob& j, float* dst) {
  for (int64_t i = 0; i < j.hd; i += 16) {
    const __mmask16 k = lanes(j.hd - i);
    __m512 v[P];
    for (int r = 0; r < P; ++r)
      v[r] = r < n ? kv16<E>(rows[r], j.first + i, k) : _mm512_setzero_ps();
    interleave_rows<P>(v);
    for (int o = 0; o < P; ++o) _mm512_store_ps(dst + i * P + 16 * o, v[o]);
  }
}

// acc[g] = acc[g] * corr[g * P] + sum_{p < nt} weight(g, p) V_p, NV zmm of each head's output
// per pass (GP * NV <= 16 accumulators, each V slice converted once).
template <int GP, int NV, DType E>
void weigh_values(const LaneJob& j, int64_t nt, const float* corr) {
  constexpr int P = 16 / GP;
  for (int64_t dc = 0; dc < j.hd; dc += 16 * NV) {
    __mmask16 mk[NV];
    for (int v = 0; v < NV; ++v) mk[v] = lanes(j.hd - dc - 16 * v);
    __m512 a[GP][NV];
    for (int g = 0; g < GP; ++g) {
      const __m512 c = _mm512_set1_ps(corr[g * P]);
      for (int v = 0; v < NV; ++v) a[g][v] = _mm512_mul_ps(_mm512_maskz_load_ps(mk[v], j.acc + g * j.hd16 + dc + 16 * v), c);
    }
    for (int64_t p = 0; p < nt; ++p) {
      const float* w = j.e + (p / P) * 16 + p % P;
      __m512 x[NV];
      for (int v = 0; v < NV; ++v) x[v] = kv16<E>(j.v_rows[p], j.first + dc + 16 * v, mk[v]);
      for (int g = 0; g < GP; ++g) {
        const __m512 wg = _mm512_set1_ps(w[g * P]);
        for (int v = 0; v < NV; ++v) a[g][v] = _mm512_fmadd_ps(wg, x[v], a[g][v]);
      }
    }
    for (int g = 0; g < GP; ++g)
      for (int v = 0; v < NV; ++v) _mm512_mask_store_ps(j.acc + g * j.hd16 + dc + 16 * v, mk[v], a[g][v]);
  }
}

// One tile of nt positions into the running max m (per lane, equal over a head's P lanes),
// partial sums l (per lane) and j.acc.
template <int GP, DType E>
void lanes_tile(const LaneJob& j, int64_t nt, __m512& m, __m512& l) {
  constexpr int P = 16 / GP;
  constexpr int NB = 8;  // chunks scored together: 8 independent FMA chains
  constexpr int NV = GP * 4 <= 16 ? 4 : 16 / GP;
  const int64_t n_chunks = (nt + P * NB - 1) / (P * NB) * NB;
  const int64_t chunk_floats = j.hd16 * P;
  for (int64_t c = 0; c < n_chunks; ++c) pack_chunk<P, E>(j.k_rows + c * P, std::min<int64_t>(P, nt - c * P), j, j.ki + c * chunk_floats);

  const __m512i pos = _mm512_and_si512(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                       _mm512_set1_epi32(P - 1));
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 mx = neg_inf;
  for (int64_t c0 = 0; c0 < n_chunks; c0 += NB) {
    __m512 s[NB];
    for (int b = 0; b < NB; ++b) s[b] = _mm512_setzero_ps();
    const float* kc = j.ki + c0 * chunk_floats;
    for (int64_t d = 0; d < j.hd; ++d) {
      const __m512 qv = _mm512_load_ps(j.qi + d * 16);
      for (int b = 0; b < NB; ++b) s[b] = _mm512_fmadd_ps(qv, broadcast_chunk<P>(kc + b * chunk_floats + d * P), s[b]);
    }
    for (int b = 0; b < NB; ++b) {
      const __mmask16 valid = _mm512_cmplt_epi32_mask(_mm512_add_epi32(pos, _mm512_set1_epi32(static_cast<int>((c0 + b) * P))),
                                                      _mm512_set1_epi32(static_cast<int>(nt)));
      const __m512 sb = _mm512_mask_mov_ps(neg_inf, valid, s[b]);
      _mm512_store_ps(j.e + (c0 + b) * 16, sb);
      mx = _mm512_max_ps(mx, sb);
    }
  }
  // Every head has a valid position in the tile, so m_new is finite; on the first tile m is
  // -inf and exp16 clamps the difference to exp(-87.3) ~ 1e-38 times a zero sum and output.
  const __m512 m_new = _mm512_max_ps(m, across_chunk<P, false>(mx));
  const __m512 corr = exp16(_mm512_sub_ps(m, m_new));
  m = m_new;
  __m512 sum = _mm512_setzero_ps();
  for (int64_t c = 0; c < n_chunks; ++c) {
    // Positions past the tile hold -inf: their weight must be 0, not exp16's floor.
    const __m512 sc = _mm512_load_ps(j.e + c * 16);
    const __mmask16 live = _mm512_cmp_ps_mask(sc, neg_inf, _CMP_NEQ_OQ);
    const __m512 w = _mm512_maskz_mov_ps(live, exp16(_mm512_sub_ps(sc, m)));
    _mm512_store_ps(j.e + c * 16, w);
    sum = _mm512_add_ps(sum, w);
  }
  l = _mm512_fmadd_ps(l, corr, sum);
  alignas(64) float cs[16];
  _mm512_store_ps(cs, corr);
  weigh_values<GP, NV, E>(j, nt, cs);
}

// Positions per tile: K of a tile as f32 in 16 KiB for heads of 64 (a third of an L1d of
// 48 KiB), a multiple of the scoring step.
inline int64_t lanes_tile_positions(int64_t hd16, int64_t step) { return std::max<int64_t>(step, 4096 / hd16 / step * step); }

// Token t's q heads over positions [p_lo, p_hi), tile by tile and within a tile kv head by
// kv head (so a tile's K/V rows are read whole, in order, while they are in cache), left as
// a part (attention_parts.h).
template <int GP, DType E>
void lanes_span(const AttentionTask& a, int64_t t, int64_t p_lo, int64_t p_hi, AttentionScratch& sc, float* part) {
  constexpr int P = 16 / GP;
  const KvLayerView& kv = *a.kv;
  const AttentionBatch& b = *a.batch;
  const int64_t group = a.n_heads / a.n_kv_heads, n_kv = a.n_kv_heads;
  const int64_t hd = a.head_dim, hd16 = (hd + 15) / 16 * 16;
  const int64_t tile = lanes_tile_positions(hd16, P * 8);
  const std::span<const int32_t> table = b.seq_tables[static_cast<size_t>(b.token_seq[t])];
  const size_t rb = kv.row_bytes();
  const auto* k_pool = static_cast<const uint8_t*>(kv.k);
  const auto* v_pool = static_cast<const uint8_t*>(kv.v);

  // Per kv head: q in lanes, outputs, max and sum lanes; shared: the K tile and its scores.
  const int64_t n_q = hd * 16, n_acc = GP * hd16, per_head = n_q + n_acc + 32;
  const int64_t n_k = tile * hd16, n_e = tile / P * 16;
  sc.floats.resize(static_cast<size_t>(n_kv * per_head + n_k + n_e + 16));
  sc.kv_rows.resize(static_cast<size_t>(2 * tile));
  float* base = sc.floats.data();
  base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64 / sizeof(float);
  float* ki = base + n_kv * per_head;
  const uint8_t** k_rows = sc.kv_rows.data();
  const uint8_t** v_rows = k_rows + tile;
  auto job = [&](int64_t h) {
    float* hb = base + h * per_head;
    return LaneJob{k_rows, v_rows, hb, ki, ki + n_k, hb + n_q, h * hd, hd, hd16};
  };
  // Positions [p, p + n)'s K/V rows, whole, into L1.
  auto prefetch_rows = [&](int64_t p, int64_t n) {
    int64_t blk = p / b.block_size, off = p % b.block_size;
    for (int64_t r = 0; r < n; ++r, ++off) {
      if (off == b.block_size) off = 0, ++blk;
      const size_t at = static_cast<size_t>(static_cast<int64_t>(table[static_cast<size_t>(blk)]) * b.block_size + off) * rb;
      for (size_t x = 0; x < rb; x += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(k_pool + at + x), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(v_pool + at + x), _MM_HINT_T0);
      }
    }
  };
  // The first tile's rows on their way while q goes into lanes (1.1B decode at 8-40
  // positions, whose rows come from memory: 10.4 -> 8.8 us a layer).
  prefetch_rows(p_lo, std::min(tile, p_hi - p_lo));
  for (int64_t h = 0; h < n_kv; ++h) {
    const LaneJob j = job(h);
    const float* q = a.q + (t * a.n_heads + h * group) * hd;  // the group's heads are adjacent
    for (int64_t d = 0; d < hd; ++d)
      for (int L = 0; L < 16; ++L) j.qi[d * 16 + L] = L / P < group ? q[(L / P) * hd + d] * a.scale : 0.0f;
    std::fill(j.acc, j.acc + n_acc, 0.0f);
    std::fill(j.acc + n_acc, j.acc + n_acc + 16, -std::numeric_limits<float>::infinity());
    std::fill(j.acc + n_acc + 16, j.acc + n_acc + 32, 0.0f);
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
    // The next tile's rows while this one is computed (4,096 positions, one thread: 872 ->
    // 681 us, on a loaded machine).
    prefetch_rows(p0 + nt, std::min(tile, p_hi - p0 - nt));
    for (int64_t h = 0; h < n_kv; ++h) {
      const LaneJob j = job(h);
      float* ml = j.acc + n_acc;
      __m512 m = _mm512_load_ps(ml), l = _mm512_load_ps(ml + 16);
      lanes_tile<GP, E>(j, nt, m, l);
      _mm512_store_ps(ml, m);
      _mm512_store_ps(ml + 16, l);
    }
  }
  for (int64_t h = 0; h < n_kv; ++h) {
    const LaneJob j = job(h);
    const float* ml = j.acc + n_acc;
    alignas(64) float ls[16];
    _mm512_store_ps(ls, across_chunk<P, true>(_mm512_load_ps(ml + 16)));
    for (int64_t g = 0; g < group; ++g) {
      float* pp = part + (h * group + g) * (hd + 2);
      pp[0] = ml[g * P];
      pp[1] = ls[g * P];
      std::copy(j.acc + g * hd16, j.acc + g * hd16 + hd, pp + 2);
    }
  }
}

// Where the heads-in-lanes kernel applies; flash_attend_span<Avx512> takes the rest.
bool lanes_fit(const AttentionTask& a) {
  const int64_t group = a.n_kv_heads > 0 ? a.n_heads / a.n_kv_heads : 0;
  const DType t = a.kv->type;
  return (t == DType::F32 || t == DType::F16 || t == DType::BF16) && a.softcap == 0.0f && group >= 3 && group <= 16;
}

template <DType E>
void lanes_span_of(const AttentionTask& a, int64_t t, int64_t p_lo, int64_t p_hi, AttentionScratch& sc, float* part) {
  const int64_t group = a.n_heads / a.n_kv_heads;
  if (group <= 4) return lanes_span<4, E>(a, t, p_lo, p_hi, sc, part);
  if (group <= 8) return lanes_span<8, E>(a, t, p_lo, p_hi, sc, part);
  lanes_span<16, E>(a, t, p_lo, p_hi, sc, part);
}

void attend_span(const AttentionTask& a, int64_t t, int64_t p_lo, int64_t p_hi, AttentionScratch& sc, float* part) {
  if (!lanes_fit(a)) return flash_attend_span<Avx512>(a, t, p_lo, p_hi, sc, part);
  switch (a.kv->type) {
    case DType::F32: return lanes_span_of<DType::F32>(a, t, p_lo, p_hi, sc, part);
    case DType::BF16: return lanes_span_of<DType::BF16>(a, t, p_lo, p_hi, sc, part);
    default: return lanes_span_of<DType::F16>(a, t, p_lo, p_hi, sc, part);
  }
}

// silu(gate) * up as the AVX2 form, 16 lanes (exp16 is exp8's polynomial, the division is
// IEEE): the same bits, in half the instructions (5632 values, in cache: 1.9 -> 1.0 us).
void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  auto at = [&](__m512 g, __m512 u) {
    return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), g)))), u);
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, at(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  if (i < n) {
    const __mmask16 m = first(n - i);
    _mm512_mask_storeu_ps(out + i, m, at(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i)));
  }
}

}  // namespace

const VecOps& avx512_vec_ops() {
  static const VecOps ops = [] {
    VecOps o = avx2_vec_ops();
    o.isa = Isa::Avx512;
    o.swiglu = &swiglu;
    o.attend_span = &attend_span;
    return o;
  }();
  return ops;
}

}  // namespace th::cpu
