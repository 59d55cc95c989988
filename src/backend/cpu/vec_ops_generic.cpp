// The vector primitives in plain C++: correct on any CPU, and what the AVX2
// table is checked against.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/flash_attention.h"
#include "backend/cpu/vec_ops.h"
#include "tensor/half.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

struct Generic {
  static void to_f32(DType t, const void* row, int64_t start, int64_t n, float* dst) {
    const auto* p = static_cast<const uint8_t*>(row);
    switch (t) {
      case DType::F32:
        std::memcpy(dst, p + start * 4, static_cast<size_t>(n) * 4);
        return;
      case DType::F16:
        for (int64_t i = 0; i < n; ++i) {
          uint16_t h;
          std::memcpy(&h, p + (start + i) * 2, 2);
          dst[i] = f16_to_f32(h);
        }
        return;
      case DType::BF16:
        for (int64_t i = 0; i < n; ++i) {
          uint16_t h;
          std::memcpy(&h, p + (start + i) * 2, 2);
          dst[i] = bf16_to_f32(h);
        }
        return;
      case DType::Q8_0:
        for (int64_t i = 0; i < n; ++i) {
          const int64_t e = start + i;
          const uint8_t* blk = p + e / kQK * sizeof(BlockQ8_0);
          uint16_t d;
          std::memcpy(&d, blk, 2);
          const auto q = static_cast<int8_t>(blk[2 + e % kQK]);
          dst[i] = static_cast<float>(q) * f16_to_f32(d);  // as dequantize_row: q * d
        }
        return;
      default: {
        const DTypeInfo& info = dtype_info(t);
        dequantize_row(t, p + static_cast<size_t>(start) / info.block_size * info.type_size, dst, n);
        return;
      }
    }
  }

  static float dot(const float* a, const float* b, int64_t n) {
    float acc = 0;
    for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
    return acc;
  }

  static void dots(const float* q, const float* const* rows, int64_t nt, int64_t hd, float* s) {
    for (int64_t j = 0; j < nt; ++j) s[j] = dot(q, rows[j], hd);
  }

  static float exp_sub_sum(float* s, int64_t n, float m) {
    float sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      s[j] = std::exp(s[j] - m);
      sum += s[j];
    }
    return sum;
  }

  static float max(const float* s, int64_t n) { return *std::max_element(s, s + n); }

  static void scale(float* y, float c, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] *= c;
  }

  static void weighted_sum(float* acc, const float* w, const float* const* rows, int64_t nt, int64_t hd) {
    for (int64_t j = 0; j < nt; ++j) {
      const float* r = rows[j];
      const float wj = w[j];
      for (int64_t i = 0; i < hd; ++i) acc[i] += wj * r[i];
    }
  }
};

void gemm_f32(const float* w, int64_t w_stride, int64_t n_rows, const float* x, int64_t x_stride, int64_t n_tokens,
              int64_t cols, float* y, int64_t y_stride) {
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t r = 0; r < n_rows; ++r) y[t * y_stride + r] = Generic::dot(w + r * w_stride, x + t * x_stride, cols);
}

void rmsnorm(const float* x, const float* weight, float* y, int64_t n, float eps) {
  float ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * weight[i];
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void exp_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

void to_f16(const float* src, void* dst, int64_t n) { quantize_row(DType::F16, src, dst, n); }

}  // namespace

const VecOps& generic_vec_ops() {
  static const VecOps ops = {Isa::Generic, &Generic::to_f32, &gemm_f32, &rmsnorm, &swiglu, &exp_f32,
                             &flash_attend_span<Generic>, &to_f16};
  return ops;
}

}  // namespace th::cpu
