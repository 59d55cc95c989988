// The compute interface the model calls. The model never calls a CPU or CUDA
// function directly: it holds activations in buffers the backend allocated,
// weights the backend prepared, and asks the backend for each op. A CPU
// backend's buffers are host memory; a CUDA backend's would be device memory
// that the model never dereferences (it reads results back with `read`).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"

namespace th {

/// @brief A weight matrix of `rows` x `cols` (cols contiguous), in the file's dtype.
struct WeightView {
  DType type = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  /// The same matrix in the layout the backend's kernels want (Backend::prepare_weight), or
  /// null. Only the backend that made it reads it; a view of part of a matrix has none.
  const void* packed = nullptr;
};

/// @brief Rotary position embedding parameters.
struct RopeParams {
  int64_t rot_dim = 0;             // rotated dimensions per head (<= head_dim)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;         // linear scaling: position * freq_scale
  bool neox = false;               // false: rotate adjacent pairs (x0,x1); true: halves (x_i, x_{i+d/2})
  const float* freq_factors = nullptr;  // rot_dim/2 divisors of theta (Llama 3 scaling), or null
};

/// @brief KV cache of one layer, paged: the K (and V) row of token slot s, kv_dim elements
/// of `type` (f32, f16, bf16 or q8_0), lives at byte s * row_bytes(type, kv_dim) of k (v).
/// A sequence's position p is in slot table[p / block_size] * block_size + p % block_size.
struct KvLayerView {
  void* k = nullptr;
  void* v = nullptr;
  int64_t kv_dim = 0;
  DType type = DType::F32;
  size_t row_bytes() const { return th::row_bytes(type, kv_dim); }
};

/// @brief The KV slot of position p of a sequence whose block table is `table` (the formula
/// above; the attention kernels walk it incrementally, block by block).
inline int64_t kv_slot(std::span<const int32_t> table, int64_t block_size, int64_t p) {
  return static_cast<int64_t>(table[static_cast<size_t>(p / block_size)]) * block_size + p % block_size;
}

/// @brief What one layer's attention may see besides causality, and how its scores are shaped.
struct AttentionOptions {
  int64_t window = 0;    // > 0: a token at pos sees positions (pos - window, pos] only (sliding window)
  float softcap = 0.0f;  // > 0: each scaled score s becomes softcap * tanh(s / softcap) (Gemma 2)
};

/// @brief Which tokens of a ragged batch belong to which sequence, and what each may see.
struct AttentionBatch {
  int64_t n_tokens = 0;
  const int32_t* token_seq = nullptr;   // [n_tokens] index into seq_tables
  const int32_t* token_pos = nullptr;   // [n_tokens] position; attends to positions 0..pos of its sequence
  const int32_t* token_slot = nullptr;  // [n_tokens] KV slot the token's K/V are written to
  std::span<const std::span<const int32_t>> seq_tables;  // per sequence: its block table
  int64_t block_size = 0;
};

/// @brief One product of a Backend::matmuls call: y = w x.
struct MatmulJob {
  const WeightView* w = nullptr;
  float* y = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  /// Activation buffers (f32) owned by the backend.
  virtual float* alloc(int64_t n_floats) = 0;
  virtual void free(float* p) = 0;
  virtual void read(const float* src, float* host_dst, int64_t n) = 0;
  /// Raw bytes between backend memory (inside a buffer from alloc) and host memory: how the
  /// KV cache's host tier swaps blocks out and back in. The default memcpy is right only
  /// for backends whose buffers are host memory (the CPU backends); a device backend
  /// overrides both with its own copies.
  virtual void copy_to_host(const void* src, void* host_dst, size_t bytes) { std::memcpy(host_dst, src, bytes); }
  virtual void copy_from_host(const void* host_src, void* dst, size_t bytes) { std::memcpy(dst, host_src, bytes); }

  /// w with its `packed` copy, when this backend's kernels want the matrix rearranged once at
  /// load rather than on every product (the CPU backend's Q4_0, Q8_0 and IQ4_NL kernels); w
  /// unchanged otherwise. The copy lives as long as the backend; data is never written.
  virtual WeightView prepare_weight(const WeightView& w) { return w; }
  /// Bytes this backend holds in prepared copies of weights (prepare_weight).
  virtual size_t prepared_weight_bytes() const { return 0; }

  /// y[t][r] = sum_c W[r][c] * x[t][c] for t < n_tokens (x: n_tokens x cols, y: n_tokens x rows).
  virtual void matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens) = 0;
  /// Several products of one input: jobs[i].y = jobs[i].w x, every w with x's cols (a layer's
  /// q, k and v; its gate and up). A backend may run them as one (the CPU backend converts x
  /// once and runs every matrix's rows in one parallel region); by default, one matmul each.
  virtual void matmuls(std::span<const MatmulJob> jobs, const float* x, int64_t n_tokens) {
    for (const MatmulJob& j : jobs) matmul(*j.w, x, j.y, n_tokens);
  }
  /// out[t] = row ids[t] of w, as f32.
  virtual void embed(const WeightView& w, const int32_t* ids, int64_t n, float* out) = 0;
  /// y = x / rms(x) * weight, per row of dim.
  virtual void rmsnorm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t dim,
                       float eps) = 0;
  /// In-place rotation of n_tokens x n_heads x head_dim, token t at position pos[t].
  virtual void rope(float* x, const int32_t* pos, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
                    const RopeParams& p) = 0;
  /// out = silu(gate) * up, elementwise.
  virtual void swiglu(const float* gate, const float* up, float* out, int64_t n) = 0;
  /// out = gelu(gate) * up, elementwise; GELU in its tanh form (Gemma's gelu_pytorch_tanh).
  virtual void geglu(const float* gate, const float* up, float* out, int64_t n) = 0;
  /// y = cap * tanh(y / cap), elementwise (Gemma 2's final-logit soft-capping).
  virtual void softcap(float* y, int64_t n, float cap) = 0;
  /// y *= s, elementwise.
  virtual void scale(float* y, int64_t n, float s) = 0;
  /// dst row idx[i] += w[i] * src row i, rows of dim floats, the idx of one call distinct
  /// (idx and w are host arrays, as gather_rows' idx): how a mixture of experts adds an
  /// expert's outputs back to the tokens routed to it.
  virtual void add_rows_scaled(float* dst, const float* src, const int32_t* idx, const float* w, int64_t n,
                               int64_t dim) = 0;
  /// dst[i] = src row idx[i] (rows of dim floats).
  virtual void gather_rows(const float* src, const int32_t* idx, int64_t n, int64_t dim, float* dst) = 0;
  /// y += x, elementwise.
  virtual void add(float* y, const float* x, int64_t n) = 0;
  /// y[t] += bias, per row of dim.
  virtual void add_bias(float* y, const float* bias, int64_t n_rows, int64_t dim) = 0;
  /// Writes the batch's K and V rows (n_tokens x kv_dim) into their slots.
  virtual void kv_write(const KvLayerView& kv, const AttentionBatch& b, const float* k, const float* v) = 0;
  /// Causal grouped-query attention of q (n_tokens x n_heads x head_dim) over the paged KV,
  /// scores q.k * scale shaped by opt; out has the same shape as q.
  virtual void attention(const KvLayerView& kv, const AttentionBatch& b, const float* q, float* out,
                         int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                         const AttentionOptions& opt) = 0;
  /// A hint: the n floats at p (a weight vector, such as a norm's) will be read after the
  /// next products; they may start on their way into cache. By default, nothing.
  virtual void prefetch(const float* p, int64_t n) { (void)p, (void)n; }
  /// A hint, given before a layer's q, k and v products: the K/V rows that attention(kv, b, ...)
  /// will read (each token's earlier positions, the last `window` of them if window > 0) may
  /// start on their way into cache while those products run. Changes no result; by default,
  /// nothing.
  virtual void prefetch_attention(const KvLayerView& kv, const AttentionBatch& b, int64_t window) {
    (void)kv, (void)b, (void)window;
  }
  /// A hint, given as soon as the previous products are done: matmuls(jobs, x, n_tokens) comes
  /// next, after some smaller ops (attention, norms); threads that would wait meanwhile may
  /// start bringing its weights into their caches. Changes no result; by default, nothing.
  virtual void prefetch_products(std::span<const MatmulJob> jobs, int64_t n_tokens) { (void)jobs, (void)n_tokens; }
};

/// @brief The reference backend: plain single-threaded implementations, obviously right
/// (matmul sums in f64). What the fast backends are tested against.
std::unique_ptr<Backend> make_reference_backend();

namespace cpu {
enum class Isa;  // backend/cpu/matmul_kernels.h
}

struct CpuBackendOptions {
  int n_threads = 0;            // 0: one per physical core this process may run on (as llama.cpp)
  bool pin = false;             // bind worker i to the i-th CPU of the process's affinity mask
  std::optional<cpu::Isa> isa;  // unset: cpu::best_isa(); must be one of cpu::available_isas()
  /// Repack the weights whose kernels want it at load (prepare_weight): a second copy of those
  /// matrices in memory. Also off when $TOKENHIVE_REPACK is 0.
  bool repack_weights = true;
};

/// @brief The fast CPU backend: a thread pool, the matmul kernels of `isa` (dequantize-and-dot
/// where a weight type has none), fused online-softmax attention, vectorized elementwise ops.
std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options = {});

}  // namespace th
