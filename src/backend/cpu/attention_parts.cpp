#include "backend/cpu/attention_parts.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace th::cpu {

void clear_attention_state(float* state, int64_t n_heads, int64_t head_dim) {
  for (int64_t h = 0; h < n_heads; ++h) {
    float* s = state + h * (head_dim + 2);
    s[0] = -std::numeric_limits<float>::infinity();
    std::fill(s + 1, s + head_dim + 2, 0.0f);
  }
}

void merge_attention_part(float* state, const float* part, int64_t n_heads, int64_t head_dim) {
  for (int64_t h = 0; h < n_heads; ++h) {
    float* s = state + h * (head_dim + 2);
    const float* p = part + h * (head_dim + 2);
    // A part's max is finite (every span has a position); the empty state's -inf gets weight
    // exp(-inf) = 0, so the first part is taken as it is, bit for bit.
    const float m = std::max(s[0], p[0]);
    const float a = std::exp(s[0] - m), c = std::exp(p[0] - m);
    s[0] = m;
    s[1] = s[1] * a + p[1] * c;
    for (int64_t i = 0; i < head_dim; ++i) s[2 + i] = s[2 + i] * a + p[2 + i] * c;
  }
}

void finish_attention_state(const float* state, float* out, int64_t n_heads, int64_t head_dim) {
  for (int64_t h = 0; h < n_heads; ++h) {
    const float* s = state + h * (head_dim + 2);
    const float inv = 1.0f / s[1];
    for (int64_t i = 0; i < head_dim; ++i) out[h * head_dim + i] = s[2 + i] * inv;
  }
}

}  // namespace th::cpu
