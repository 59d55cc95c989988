// The CUDA backend's products y = W x (included by .cu files only).
//
// Two paths, chosen by the weight's device type and the number of tokens n:
// - gemv: our own kernel, one warp per row, the weight read once in its device form
//   (f32, f16, bf16, or fp8 codes with their block scales, decoded in registers) and
//   multiplied with f32 activations in f32. A row's sum runs in the same order for any n
//   (each lane sums its 16-byte chunks in order, then a fixed butterfly), so a token's
//   result does not depend on what it is batched with. f32 weights take this path at
//   every n (in tiles of kGemvMaxTokens tokens); the others up to kGemvMaxTokens tokens,
//   which is decode, where the product is bound by reading the weight.
// - tensor cores: for 16-bit and fp8 weights beyond kGemvMaxTokens tokens, the
//   activations are rounded to the weight's 16-bit type (fp8 weights are widened to bf16
//   first, exactly) and cuBLAS GemmEx multiplies on tensor cores, accumulating in f32.
//   There a token's result depends on its batch in the last bits (as in other servers);
//   the compute type fp32 (f32 weights) keeps batch invariance at every n.
#pragma once

#include <functional>

#include "backend/cuda/cuda_common.h"

namespace th::cuda {

constexpr int64_t kGemvMaxTokens = 8;
constexpr int kMaxJobs = 4;  // products one launch runs (matmuls)

class Matmul {
 public:
  /// Launches on stream s (blas's stream too).
  Matmul(cublasHandle_t blas, cudaStream_t s) : blas_(blas), s_(s) {}
  /// Makes the scratch buffers run(w, ..., n) needs; before_free runs first if one must be
  /// reallocated (work still queued may use it). Returns what run's launches depend on
  /// besides their arguments (the scratch buffers' addresses), for a launch key.
  const void* reserve(const DeviceWeight& w, int64_t n, const std::function<void()>& before_free);
  /// y[t][r] = sum_c W[r][c] x[t][c] for t < n (x: n x cols, y: n x rows, device memory),
  /// queued on the stream; reserve(w, n) first.
  void run(const DeviceWeight& w, const float* x, float* y, int64_t n);
  /// Whether run_fused takes these k products of one input (same type and cols, 2 to
  /// kMaxJobs of them, on the gemv path): one launch instead of k.
  static bool fuses(const DeviceWeight* const* ws, int k, int64_t n);
  /// ys[j] = ws[j] x for j < k, as k runs would compute them, bit for bit, in one launch.
  void run_fused(const DeviceWeight* const* ws, float* const* ys, int k, const float* x, int64_t n);

 private:
  void gemv(const DeviceWeight* const* ws, float* const* ys, int k, const float* x, int64_t n);
  void tensor_cores(const DeviceWeight& w, const float* x, float* y, int64_t n);
  cublasHandle_t blas_;
  cudaStream_t s_;
  Scratch x16_, w16_;
};

}  // namespace th::cuda
