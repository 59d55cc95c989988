// Attention over a token's positions in spans, merged: a part is, per q head, the max
// score m over the span, the sum l of exp(score - m) and the output sum of exp(score - m)
// V (head_dim floats), laid out [m, l, out...] head after head. Merging two parts rescales
// both to the larger max, which is how flash attention's tiles combine, so splitting a
// long context across threads changes nothing but where the work runs.
#pragma once

#include <cstdint>

namespace th::cpu {

/// @brief Positions per span for a token that sees n positions: about a quarter of them, a
/// multiple of 64, from 64 to 512. A decode token at 4,096 positions is 8 spans for the
/// threads to share and at 300 positions 4; a span's K/V rows (at most 512 x 512 bytes each
/// for TinyLlama) stay in L2 while its heads are computed. A function of n alone, so a
/// token's spans do not depend on its batch.
inline int64_t attention_span(int64_t n) {
  const int64_t quarter = (n + 3) / 4;
  const int64_t len = (quarter + 63) / 64 * 64;
  return len < 64 ? 64 : len > 512 ? 512 : len;
}

/// @brief The empty state (m = -inf, l = 0, out = 0) for n_heads heads of head_dim.
void clear_attention_state(float* state, int64_t n_heads, int64_t head_dim);

/// @brief state <- state merged with part (same layout); parts merged in the same order give
/// the same bits however they were computed.
void merge_attention_part(float* state, const float* part, int64_t n_heads, int64_t head_dim);

/// @brief out[h][i] = state's out / l, n_heads x head_dim floats.
void finish_attention_state(const float* state, float* out, int64_t n_heads, int64_t head_dim);

}  // namespace th::cpu
