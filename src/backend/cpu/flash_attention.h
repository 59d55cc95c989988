// Fused causal attention for one token, flash-attention style: the KV positions
// of a span are visited once, in tiles, keeping per q head a running maximum m, a
// running sum l of exp(score - m) and an unnormalized output; when a tile raises the
// maximum, the sum and output are rescaled by exp(m_old - m_new). No buffer of
// n_positions scores, one pass over K and V, and each K/V row is read and converted
// to f32 once for the whole group of q heads sharing its kv head (8 of them for
// TinyLlama's 32 q / 4 kv heads, 4 for Llama 3 8B's 32 / 8). The result is a part
// (attention_parts.h) that the backend merges with the token's other spans.
//
// A template over the ISA's primitives `S` so that the generic and the AVX2
// tables share one algorithm; each instantiation lives in its ISA's file.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>

#include "backend/cpu/vec_ops.h"

namespace th::cpu {

// Token t's q heads over positions [p_lo, p_hi), tile by tile and within a tile kv head by
// kv head (a tile's K/V rows are read whole while in cache), left as a part
// (attention_parts.h: per q head its max, sum and unnormalized output): VecOps::attend_span.
template <class S>
void flash_attend_span(const AttentionTask& a, int64_t t, int64_t p_lo, int64_t p_hi, AttentionScratch& sc, float* part) {
  const KvLayerView& kv = *a.kv;
  const AttentionBatch& b = *a.batch;
  const int64_t group = a.n_heads / a.n_kv_heads, n_kv = a.n_kv_heads;
  const int64_t hd = a.head_dim;
  const int64_t tile = attention_tile(hd);
  const std::span<const int32_t> table = b.seq_tables[static_cast<size_t>(b.token_seq[t])];
  const size_t rb = kv.row_bytes();
  const auto* k_pool = static_cast<const uint8_t*>(kv.k);
  const auto* v_pool = static_cast<const uint8_t*>(kv.v);

  // Scratch: per kv head the scaled q of its group, the group's unnormalized outputs, running
  // max and sum per q head; shared: K and V tiles and one tile of scores.
  const int64_t per_head = group * hd * 2 + group * 2;
  sc.floats.resize(static_cast<size_t>(n_kv * per_head + tile * hd * 2 + tile));
  sc.rows.resize(static_cast<size_t>(tile * 2));
  float* k_tile = sc.floats.data() + n_kv * per_head;
  float* v_tile = k_tile + tile * hd;
  float* s = v_tile + tile * hd;
  const float** kp = sc.rows.data();
  const float** vp = kp + tile;

  for (int64_t h = 0; h < n_kv; ++h) {
    float* qs = sc.floats.data() + h * per_head;
    float* acc = qs + group * hd;
    const float* q = a.q + (t * a.n_heads + h * group) * hd;  // the group's heads are adjacent
    for (int64_t i = 0; i < group * hd; ++i) qs[i] = q[i] * a.scale;
    std::fill(acc, acc + group * hd, 0.0f);
    std::fill(acc + group * hd, acc + group * hd + group, -std::numeric_limits<float>::infinity());
    std::fill(acc + group * hd + group, acc + group * hd + 2 * group, 0.0f);
  }
  for (int64_t p0 = p_lo; p0 < p_hi; p0 += tile) {
    const int64_t nt = std::min(tile, p_hi - p0);
    for (int64_t h = 0; h < n_kv; ++h) {
      const float* qs = sc.floats.data() + h * per_head;
      float* acc = sc.floats.data() + h * per_head + group * hd;
      float* m = acc + group * hd;
      float* l = m + group;
      const int64_t first = h * hd;  // this head's elements within a K/V row
      // The block and offset of each position, stepped (two divisions per position were 10%
      // of decode attention at 4,096 positions).
      int64_t blk = p0 / b.block_size, off = p0 % b.block_size;
      for (int64_t j = 0; j < nt; ++j, ++off) {
        if (off == b.block_size) off = 0, ++blk;
        const int64_t slot = static_cast<int64_t>(table[static_cast<size_t>(blk)]) * b.block_size + off;
        const uint8_t* kr = k_pool + static_cast<size_t>(slot) * rb;
        const uint8_t* vr = v_pool + static_cast<size_t>(slot) * rb;
        if (kv.type == DType::F32) {
          kp[j] = reinterpret_cast<const float*>(kr) + first;
          vp[j] = reinterpret_cast<const float*>(vr) + first;
        } else {
          S::to_f32(kv.type, kr, first, hd, k_tile + j * hd);
          S::to_f32(kv.type, vr, first, hd, v_tile + j * hd);
          kp[j] = k_tile + j * hd;
          vp[j] = v_tile + j * hd;
        }
      }
      for (int64_t g = 0; g < group; ++g) {
        S::dots(qs + g * hd, kp, nt, hd, s);
        if (a.softcap > 0)
          for (int64_t j = 0; j < nt; ++j) s[j] = a.softcap * std::tanh(s[j] / a.softcap);
        const float m_new = std::max(m[g], S::max(s, nt));
        const float correction = std::exp(m[g] - m_new);  // 0 on the first tile (m = -inf)
        l[g] = l[g] * correction + S::exp_sub_sum(s, nt, m_new);
        if (correction != 1.0f) S::scale(acc + g * hd, correction, hd);
        S::weighted_sum(acc + g * hd, s, vp, nt, hd);
        m[g] = m_new;
      }
    }
  }
  for (int64_t h = 0; h < n_kv; ++h) {
    const float* acc = sc.floats.data() + h * per_head + group * hd;
    for (int64_t g = 0; g < group; ++g) {
      float* pp = part + (h * group + g) * (hd + 2);
      pp[0] = acc[group * hd + g];
      pp[1] = acc[group * hd + group + g];
      std::copy(acc + g * hd, acc + g * hd + hd, pp + 2);
    }
  }
}

}  // namespace th::cpu
