// The vector primitives the fast CPU backend is built from, one table per ISA:
// vec_ops_generic.cpp is plain C++ for any x86-64 (or other) CPU, and
// vec_ops_avx2.cpp the same algorithms with AVX2/FMA/F16C intrinsics, compiled
// for that ISA alone and only called after the CPU was checked. Ops that are
// bound by memory, not arithmetic (add, copies, RoPE), stay in plain loops in
// cpu_backend.cpp, which the compiler vectorizes well enough.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/matmul_kernels.h"
#include "tensor/dtype.h"

namespace th::cpu {

/// @brief One attention call's arguments, shared by all its (token, kv head) tasks.
struct AttentionTask {
  const KvLayerView* kv = nullptr;
  const AttentionBatch* batch = nullptr;
  const float* q = nullptr;  // n_tokens x n_heads x head_dim
  float* out = nullptr;      // same shape
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  float scale = 1.0f;
  int64_t window = 0;    // AttentionOptions::window
  float softcap = 0.0f;  // AttentionOptions::softcap
};

/// @brief Per-thread working memory for attention, grown on first use and then reused.
struct AttentionScratch {
  std::vector<float> floats;
  std::vector<const float*> rows;
  std::vector<const uint8_t*> kv_rows;  // K/V row pointers (the heads-in-lanes kernels)
  std::vector<float> part, state;          // a span's part and a token's merged state (attention_parts.h)
};

/// @brief KV positions processed per step of the online softmax: K and V tiles of
/// positions x head_dim f32 take 16 KiB together, half of Zen 3's 32 KiB L1d.
inline int64_t attention_tile(int64_t head_dim) {
  int64_t t = 2048 / (head_dim > 0 ? head_dim : 1);
  return t < 8 ? 8 : t > 256 ? 256 : t;
}

struct VecOps {
  Isa isa = Isa::Generic;
  /// dst[i] = element start + i of a row of type t, for i < n. f32, f16, bf16 and q8_0 take
  /// any start and n; other types whole blocks (start and n multiples of the block size).
  /// Values equal dequantize_row's exactly.
  void (*to_f32)(DType t, const void* row, int64_t start, int64_t n, float* dst) = nullptr;
  /// y[t * y_stride + r] = dot(w row r, x row t) for r < n_rows, t < n_tokens, f32 rows of
  /// `cols`. Each dot is computed the same way whatever n_rows and n_tokens are, so a
  /// token's result does not depend on what else is in the batch.
  void (*gemm_f32)(const float* w, int64_t w_stride, int64_t n_rows, const float* x, int64_t x_stride,
                   int64_t n_tokens, int64_t cols, float* y, int64_t y_stride) = nullptr;
  /// y = x / rms(x) * weight over one row of n.
  void (*rmsnorm)(const float* x, const float* weight, float* y, int64_t n, float eps) = nullptr;
  /// out = silu(gate) * up over n elements.
  void (*swiglu)(const float* gate, const float* up, float* out, int64_t n) = nullptr;
  /// y[i] = exp(x[i]) (relative error at most kExpMaxRelError for x in [-87, 88]).
  void (*exp)(const float* x, float* y, int64_t n) = nullptr;
  /// Causal attention of token `token`'s q heads over positions [p_lo, p_hi) of every kv
  /// head, flash-attention style (one pass, a running max and sum, no full-length score
  /// buffer, each K/V row converted once for the group of q heads sharing it), as a part
  /// (attention_parts.h) of n_heads x (head_dim + 2) floats. The backend splits a token's
  /// positions into spans (attention_span) and merges the parts in order, so a token's
  /// result is the same whichever thread computes which span.
  void (*attend_span)(const AttentionTask& task, int64_t token, int64_t p_lo, int64_t p_hi, AttentionScratch& scratch,
                      float* part) = nullptr;
  /// dst = src as n f16 values, the bytes of quantize_row(DType::F16): round to nearest
  /// even, NaN as sign | 0x7e00 (a KV row's write; F16C's vcvtps2ph where the CPU has it).
  void (*to_f16)(const float* src, void* dst, int64_t n) = nullptr;
};

/// @brief The vectorized exp's error bound (Cephes' expf polynomial: 1.7e-7, under 3 units
/// of f32 rounding); the generic table uses std::exp, which is tighter.
inline constexpr float kExpMaxRelError = 1.8e-7f;

/// @brief The table for `isa` (AVX-512's is AVX2's with attention in zmm registers: the
/// other ops are not its bottleneck).
const VecOps& vec_ops(Isa isa);

const VecOps& generic_vec_ops();
const VecOps& avx2_vec_ops();
const VecOps& avx512_vec_ops();

}  // namespace th::cpu
