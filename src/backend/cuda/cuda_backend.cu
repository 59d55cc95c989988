// The CUDA backend: every op of backend.h on the device, mirroring
// backend/cpu/reference_backend.cpp op by op. Simplicity and correctness over
// speed: one plain kernel per op, the legacy default stream (so every op is
// ordered after the previous one and every cudaMemcpy synchronizes), fp32
// arithmetic throughout (matmul: the weight widened to f32 in a scratch
// buffer, then cuBLAS SGEMM in plain fp32, no TF32).
//
// Errors: the Backend interface returns nothing, so a failed CUDA or cuBLAS
// call (or a failed launch, checked after every launch) aborts with a message
// naming the call and CUDA's error string. make_cuda_backend returns errors as
// values ("no CUDA device: ...").
//
// Host and device memory: activations, KV pools and buffers from alloc() are
// device memory. Everything else the interface passes is host memory: weights
// (uploaded once, see cuda_backend.h), norm weights, biases, freq_factors, ids,
// positions, slots and block tables (copied into scratch buffers at each call).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/weight_plan.h"
#include "tensor/quant.h"

namespace th {

namespace {

[[noreturn]] void die(const char* what, const char* err, const char* file, int line) {
  std::fprintf(stderr, "tokenhive cuda: %s failed at %s:%d: %s\n", what, file, line, err);
  std::abort();
}

#define TH_CUDA_CHECK(call)                                                    \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) die(#call, cudaGetErrorString(e_), __FILE__, __LINE__); \
  } while (0)

#define TH_CUBLAS_CHECK(call)                                                  \
  do {                                                                         \
    cublasStatus_t s_ = (call);                                                \
    if (s_ != CUBLAS_STATUS_SUCCESS) die(#call, cublasGetStatusString(s_), __FILE__, __LINE__); \
  } while (0)

#define TH_LAUNCH_CHECK(name) TH_CUDA_CHECK(cudaGetLastError())

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 * 32 ? 65535 * 32 : b));
}

// ---- kernels ---------------------------------------------------------------------------

// Grid-stride loops everywhere: any n works with any grid.
__global__ void widen_f16(const __half* src, float* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = __half2float(src[i]);
}
__global__ void widen_bf16(const __nv_bfloat16* src, float* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = __bfloat162float(src[i]);
}

__global__ void rmsnorm_kernel(const float* x, const float* w, float* y, int64_t dim, float eps) {
  __shared__ float part[kThreads];
  const float* xr = x + blockIdx.x * dim;
  float* yr = y + blockIdx.x * dim;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
  part[threadIdx.x] = ss;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  const float scale = 1.0f / sqrtf(part[0] / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = xr[i] * scale * w[i];
}

// One thread per (token, head, pair).
__global__ void rope_kernel(float* x, const int32_t* pos, const float* inv_freq, int64_t n_tokens, int64_t n_heads,
                            int64_t head_dim, int64_t half, float freq_scale, bool neox) {
  const int64_t total = n_tokens * n_heads * half;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total; j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = j % half;
    const int64_t th = j / half;  // token * n_heads + head
    const int64_t t = th / n_heads;
    const float position = static_cast<float>(pos[t]) * freq_scale;
    const float theta = position * inv_freq[i];
    const float c = cosf(theta), s = sinf(theta);
    float* v = x + th * head_dim;
    const int64_t a = neox ? i : 2 * i;
    const int64_t b = neox ? i + half : 2 * i + 1;
    const float x0 = v[a], x1 = v[b];
    v[a] = x0 * c - x1 * s;
    v[b] = x0 * s + x1 * c;
  }
}

__global__ void swiglu_kernel(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void geglu_kernel(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float x = gate[i];
    out[i] = 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x))) * up[i];
  }
}

__global__ void softcap_kernel(float* y, int64_t n, float cap) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = cap * tanhf(y[i] / cap);
}

__global__ void scale_kernel(float* y, int64_t n, float s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] *= s;
}

// The rows of one call are distinct (one expert's tokens), so no two threads add to one element.
__global__ void add_rows_scaled_kernel(float* dst, const float* src, const int32_t* idx, const float* w, int64_t n,
                                       int64_t dim) {
  const int64_t total = n * dim;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total; j += int64_t(gridDim.x) * blockDim.x)
    dst[static_cast<int64_t>(idx[j / dim]) * dim + j % dim] += w[j / dim] * src[j];
}

__global__ void gather_kernel(const float* src, const int32_t* idx, int64_t n, int64_t dim, float* dst) {
  const int64_t total = n * dim;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total; j += int64_t(gridDim.x) * blockDim.x)
    dst[j] = src[static_cast<int64_t>(idx[j / dim]) * dim + j % dim];
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] += x[i];
}

__global__ void add_bias_kernel(float* y, const float* bias, int64_t n, int64_t dim) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] += bias[i % dim];
}

// KV element types the device reads and (except q8_0) writes.
enum KvT : int { kKvF32 = 0, kKvF16 = 1, kKvBF16 = 2, kKvQ8_0 = 3 };

__device__ float kv_load(const uint8_t* row, int kt, int64_t i) {
  switch (kt) {
    case kKvF32: return reinterpret_cast<const float*>(row)[i];
    case kKvF16: return __half2float(reinterpret_cast<const __half*>(row)[i]);
    case kKvBF16: return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(row)[i]);
    default: {  // q8_0: blocks of 34 bytes, an f16 scale then 32 int8
      const uint8_t* blk = row + (i / 32) * 34;
      const __half d = *reinterpret_cast<const __half*>(blk);  // 2-byte aligned: 34 is even
      return __half2float(d) * static_cast<float>(reinterpret_cast<const int8_t*>(blk + 2)[i % 32]);
    }
  }
}

// One thread per (token, element): K and V rows of the batch into their slots (f32, f16, bf16).
__global__ void kv_write_kernel(uint8_t* k_pool, uint8_t* v_pool, const float* k, const float* v,
                                const int32_t* slots, int64_t n_tokens, int64_t kv_dim, int64_t row_bytes, int kt) {
  const int64_t total = n_tokens * kv_dim;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < total; j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = j / kv_dim, i = j % kv_dim;
    uint8_t* kr = k_pool + static_cast<int64_t>(slots[t]) * row_bytes;
    uint8_t* vr = v_pool + static_cast<int64_t>(slots[t]) * row_bytes;
    if (kt == kKvF32) {
      reinterpret_cast<float*>(kr)[i] = k[j];
      reinterpret_cast<float*>(vr)[i] = v[j];
    } else if (kt == kKvF16) {
      reinterpret_cast<__half*>(kr)[i] = __float2half_rn(k[j]);
      reinterpret_cast<__half*>(vr)[i] = __float2half_rn(v[j]);
    } else {
      reinterpret_cast<__nv_bfloat16*>(kr)[i] = __float2bfloat16_rn(k[j]);
      reinterpret_cast<__nv_bfloat16*>(vr)[i] = __float2bfloat16_rn(v[j]);
    }
  }
}

constexpr int kAttnWarps = 4;
constexpr int kMaxHeadDim = 256;  // kMaxHeadDim / 32 accumulators per lane
constexpr int kPerLane = kMaxHeadDim / 32;

// One block of kAttnWarps warps per (token, head). Warp w takes positions w, w + kAttnWarps, ...;
// for each, the lanes compute the score together (shuffle reduction), then update the warp's
// online softmax (running max m, sum l, accumulator over head_dim spread over the lanes).
// The warps' partial results are merged at the end through shared memory.
__global__ void attention_kernel(const uint8_t* k_pool, const uint8_t* v_pool, int64_t row_bytes, int kt,
                                 const float* q, float* out, const int32_t* token_seq, const int32_t* token_pos,
                                 const int32_t* table_offsets, const int32_t* tables, int64_t block_size,
                                 int64_t n_heads, int64_t group, int64_t head_dim, float scale, int64_t window,
                                 float softcap) {
  const int64_t t = blockIdx.x / n_heads, h = blockIdx.x % n_heads;
  const int64_t kvh = h / group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float* qh = q + (t * n_heads + h) * head_dim;
  const int32_t* table = tables + table_offsets[token_seq[t]];
  const int64_t n_pos = static_cast<int64_t>(token_pos[t]) + 1;

  float m = -INFINITY, l = 0;
  float acc[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) acc[j] = 0;

  const int64_t p_begin = window > 0 ? (n_pos > window ? n_pos - window : 0) : 0;  // sliding window
  for (int64_t p = p_begin + warp; p < n_pos; p += kAttnWarps) {
    // kv_slot (backend.h), on the device.
    const int64_t slot = static_cast<int64_t>(table[p / block_size]) * block_size + p % block_size;
    const uint8_t* krow = k_pool + slot * row_bytes;
    const uint8_t* vrow = v_pool + slot * row_bytes;
    float s = 0;
    for (int64_t i = lane; i < head_dim; i += 32) s += qh[i] * kv_load(krow, kt, kvh * head_dim + i);
#pragma unroll
    for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
    s *= scale;
    if (softcap > 0) s = softcap * tanhf(s / softcap);
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new);  // 0 on the first position (m = -inf)
    const float e = expf(s - m_new);
    l = l * corr + e;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t i = lane + 32 * j;
      if (i < head_dim) acc[j] = acc[j] * corr + e * kv_load(vrow, kt, kvh * head_dim + i);
    }
    m = m_new;
  }

  __shared__ float sm_m[kAttnWarps], sm_l[kAttnWarps];
  __shared__ float sm_acc[kAttnWarps][kMaxHeadDim];
  if (lane == 0) {
    sm_m[warp] = m;
    sm_l[warp] = l;
  }
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t i = lane + 32 * j;
    if (i < head_dim) sm_acc[warp][i] = acc[j];
  }
  __syncthreads();
  float M = -INFINITY;
  for (int w = 0; w < kAttnWarps; ++w) M = fmaxf(M, sm_m[w]);
  float L = 0;
  for (int w = 0; w < kAttnWarps; ++w)
    if (sm_l[w] > 0) L += sm_l[w] * expf(sm_m[w] - M);  // a warp with no position has l = 0
  float* oh = out + (t * n_heads + h) * head_dim;
  for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) {
    float o = 0;
    for (int w = 0; w < kAttnWarps; ++w)
      if (sm_l[w] > 0) o += sm_acc[w][i] * expf(sm_m[w] - M);
    oh[i] = o / L;
  }
}

// ---- the backend -----------------------------------------------------------------------

// A growable device buffer for per-call uploads.
struct Scratch {
  void* p = nullptr;
  size_t cap = 0;
  void* ensure(size_t bytes) {
    if (bytes <= cap) return p;
    if (p) TH_CUDA_CHECK(cudaFree(p));
    p = nullptr;
    cap = 0;
    TH_CUDA_CHECK(cudaMalloc(&p, bytes < 256 ? 256 : bytes));
    cap = bytes < 256 ? 256 : bytes;
    return p;
  }
  template <class T>
  T* upload(const T* host, int64_t n) {
    auto* d = static_cast<T*>(ensure(static_cast<size_t>(n) * sizeof(T)));
    if (n > 0) TH_CUDA_CHECK(cudaMemcpy(d, host, static_cast<size_t>(n) * sizeof(T), cudaMemcpyHostToDevice));
    return d;
  }
  ~Scratch() {
    if (p) cudaFree(p);  // no check: destructors run at exit too, when the context may be gone
  }
};

struct DeviceWeight {
  cuda::DeviceWeightType type;
  void* data = nullptr;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {
    TH_CUDA_CHECK(cudaSetDevice(device));
    TH_CUBLAS_CHECK(cublasCreate(&blas_));
    TH_CUBLAS_CHECK(cublasSetMathMode(blas_, CUBLAS_PEDANTIC_MATH));  // fp32 as written: no TF32
  }
  ~CudaBackend() override {
    for (auto& kv : weights_) cudaFree(kv.second.data);
    cublasDestroy(blas_);
  }

  std::string_view name() const override { return "cuda"; }

  float* alloc(int64_t n) override {
    void* p = nullptr;
    const size_t bytes = static_cast<size_t>(n < 1 ? 1 : n) * sizeof(float);
    TH_CUDA_CHECK(cudaMalloc(&p, bytes));
    TH_CUDA_CHECK(cudaMemset(p, 0, bytes));  // as the reference: buffers start zeroed
    return static_cast<float*>(p);
  }
  void free(float* p) override {
    if (p) TH_CUDA_CHECK(cudaFree(p));
  }
  void read(const float* src, float* dst, int64_t n) override {
    if (n > 0) TH_CUDA_CHECK(cudaMemcpy(dst, src, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost));
  }
  void copy_to_host(const void* src, void* dst, size_t bytes) override {
    if (bytes) TH_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }
  void copy_from_host(const void* src, void* dst, size_t bytes) override {
    if (bytes) TH_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }

  void matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens) override {
    if (n_tokens <= 0 || w.rows <= 0) return;
    const DeviceWeight& dw = weight(w);
    const int64_t n = w.rows * w.cols;
    const float* wf = static_cast<const float*>(dw.data);
    if (dw.type != cuda::DeviceWeightType::F32) {  // widen to f32 (exact), then fp32 GEMM
      float* tmp = static_cast<float*>(widened_.ensure(static_cast<size_t>(n) * sizeof(float)));
      if (dw.type == cuda::DeviceWeightType::F16)
        widen_f16<<<blocks_for(n), kThreads>>>(static_cast<const __half*>(dw.data), tmp, n);
      else
        widen_bf16<<<blocks_for(n), kThreads>>>(static_cast<const __nv_bfloat16*>(dw.data), tmp, n);
      TH_LAUNCH_CHECK("widen");
      wf = tmp;
    }
    // Row-major W (rows x cols) is column-major cols x rows; Y^T (rows x n_tokens, column-major)
    // = W * X^T, i.e. C = op(A) B with A = W (column-major cols x rows, transposed), B = X^T.
    const float alpha = 1.0f, beta = 0.0f;
    TH_CUBLAS_CHECK(cublasSgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.rows), static_cast<int>(n_tokens),
                                static_cast<int>(w.cols), &alpha, wf, static_cast<int>(w.cols), x,
                                static_cast<int>(w.cols), &beta, y, static_cast<int>(w.rows)));
  }

  // Rows are dequantized on the host with the reference dequantizer (exact, as the reference).
  void embed(const WeightView& w, const int32_t* ids, int64_t n, float* out) override {
    const size_t rb = row_bytes(w.type, w.cols);
    const auto* base = static_cast<const uint8_t*>(w.data);
    std::vector<float> host(static_cast<size_t>(n * w.cols));
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* src = base + static_cast<size_t>(ids[i]) * rb;
      if (w.type == DType::F32)
        std::memcpy(host.data() + i * w.cols, src, static_cast<size_t>(w.cols) * sizeof(float));
      else
        dequantize_row(w.type, src, host.data() + i * w.cols, w.cols);
    }
    copy_from_host(host.data(), out, host.size() * sizeof(float));
  }

  void rmsnorm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t dim, float eps) override {
    if (n_rows <= 0) return;
    const float* dw = a_.upload(weight, dim);
    rmsnorm_kernel<<<static_cast<unsigned>(n_rows), kThreads>>>(x, dw, y, dim, eps);
    TH_LAUNCH_CHECK("rmsnorm");
  }

  void rope(float* x, const int32_t* pos, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
            const RopeParams& p) override {
    const int64_t half = p.rot_dim / 2;
    if (n_tokens <= 0 || half <= 0) return;
    // The inverse frequencies exactly as the reference computes them (on the host).
    std::vector<float> inv_freq(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i) {
      float f = 1.0f / std::pow(p.freq_base, static_cast<float>(2 * i) / static_cast<float>(p.rot_dim));
      if (p.freq_factors) f /= p.freq_factors[i];
      inv_freq[static_cast<size_t>(i)] = f;
    }
    const float* d_inv = a_.upload(inv_freq.data(), half);
    const int32_t* d_pos = b_.upload(pos, n_tokens);
    rope_kernel<<<blocks_for(n_tokens * n_heads * half), kThreads>>>(x, d_pos, d_inv, n_tokens, n_heads, head_dim,
                                                                      half, p.freq_scale, p.neox);
    TH_LAUNCH_CHECK("rope");
  }

  void swiglu(const float* gate, const float* up, float* out, int64_t n) override {
    if (n <= 0) return;
    swiglu_kernel<<<blocks_for(n), kThreads>>>(gate, up, out, n);
    TH_LAUNCH_CHECK("swiglu");
  }

  void geglu(const float* gate, const float* up, float* out, int64_t n) override {
    if (n <= 0) return;
    geglu_kernel<<<blocks_for(n), kThreads>>>(gate, up, out, n);
    TH_LAUNCH_CHECK("geglu");
  }

  void softcap(float* y, int64_t n, float cap) override {
    if (n <= 0) return;
    softcap_kernel<<<blocks_for(n), kThreads>>>(y, n, cap);
    TH_LAUNCH_CHECK("softcap");
  }

  void scale(float* y, int64_t n, float s) override {
    if (n <= 0) return;
    scale_kernel<<<blocks_for(n), kThreads>>>(y, n, s);
    TH_LAUNCH_CHECK("scale");
  }

  void add_rows_scaled(float* dst, const float* src, const int32_t* idx, const float* w, int64_t n,
                       int64_t dim) override {
    if (n <= 0 || dim <= 0) return;
    const int32_t* d_idx = b_.upload(idx, n);
    const float* d_w = a_.upload(w, n);
    add_rows_scaled_kernel<<<blocks_for(n * dim), kThreads>>>(dst, src, d_idx, d_w, n, dim);
    TH_LAUNCH_CHECK("add_rows_scaled");
  }

  void gather_rows(const float* src, const int32_t* idx, int64_t n, int64_t dim, float* dst) override {
    if (n <= 0 || dim <= 0) return;
    const int32_t* d_idx = b_.upload(idx, n);
    gather_kernel<<<blocks_for(n * dim), kThreads>>>(src, d_idx, n, dim, dst);
    TH_LAUNCH_CHECK("gather_rows");
  }

  void add(float* y, const float* x, int64_t n) override {
    if (n <= 0) return;
    add_kernel<<<blocks_for(n), kThreads>>>(y, x, n);
    TH_LAUNCH_CHECK("add");
  }

  void add_bias(float* y, const float* bias, int64_t n_rows, int64_t dim) override {
    if (n_rows <= 0 || dim <= 0) return;
    const float* d_bias = a_.upload(bias, dim);
    add_bias_kernel<<<blocks_for(n_rows * dim), kThreads>>>(y, d_bias, n_rows * dim, dim);
    TH_LAUNCH_CHECK("add_bias");
  }

  void kv_write(const KvLayerView& kv, const AttentionBatch& b, const float* k, const float* v) override {
    if (b.n_tokens <= 0) return;
    const size_t rb = kv.row_bytes();
    const int kt = kv_type(kv.type);
    if (kt == kKvQ8_0) {  // quantized on the host with the reference quantizer, row by row
      std::vector<float> row(static_cast<size_t>(kv.kv_dim));
      std::vector<uint8_t> bytes(rb);
      for (int64_t t = 0; t < b.n_tokens; ++t) {
        const size_t at = static_cast<size_t>(b.token_slot[t]) * rb;
        for (int which = 0; which < 2; ++which) {
          read((which ? v : k) + t * kv.kv_dim, row.data(), kv.kv_dim);
          quantize_row(kv.type, row.data(), bytes.data(), kv.kv_dim);
          copy_from_host(bytes.data(), static_cast<uint8_t*>(which ? kv.v : kv.k) + at, rb);
        }
      }
      return;
    }
    const int32_t* d_slots = b_.upload(b.token_slot, b.n_tokens);
    kv_write_kernel<<<blocks_for(b.n_tokens * kv.kv_dim), kThreads>>>(
        static_cast<uint8_t*>(kv.k), static_cast<uint8_t*>(kv.v), k, v, d_slots, b.n_tokens, kv.kv_dim,
        static_cast<int64_t>(rb), kt);
    TH_LAUNCH_CHECK("kv_write");
  }

  void attention(const KvLayerView& kv, const AttentionBatch& b, const float* q, float* out, int64_t n_heads,
                 int64_t n_kv_heads, int64_t head_dim, float scale, const AttentionOptions& opt) override {
    if (b.n_tokens <= 0) return;
    if (head_dim > kMaxHeadDim) {
      std::fprintf(stderr, "tokenhive cuda: attention supports head_dim <= %d, got %lld\n", kMaxHeadDim,
                   static_cast<long long>(head_dim));
      std::abort();
    }
    // The block tables, flattened, with each sequence's offset.
    std::vector<int32_t> offsets, flat;
    for (const auto& t : b.seq_tables) {
      offsets.push_back(static_cast<int32_t>(flat.size()));
      flat.insert(flat.end(), t.begin(), t.end());
    }
    const int32_t* d_seq = b_.upload(b.token_seq, b.n_tokens);
    const int32_t* d_pos = c_.upload(b.token_pos, b.n_tokens);
    const int32_t* d_off = d_.upload(offsets.data(), static_cast<int64_t>(offsets.size()));
    const int32_t* d_tab = e_.upload(flat.data(), static_cast<int64_t>(flat.size()));
    attention_kernel<<<static_cast<unsigned>(b.n_tokens * n_heads), kAttnWarps * 32>>>(
        static_cast<const uint8_t*>(kv.k), static_cast<const uint8_t*>(kv.v), static_cast<int64_t>(kv.row_bytes()),
        kv_type(kv.type), q, out, d_seq, d_pos, d_off, d_tab, b.block_size, n_heads, n_heads / n_kv_heads, head_dim,
        scale, opt.window, opt.softcap);
    TH_LAUNCH_CHECK("attention");
  }

 private:
  static int kv_type(DType t) {
    switch (t) {
      case DType::F32: return kKvF32;
      case DType::F16: return kKvF16;
      case DType::BF16: return kKvBF16;
      case DType::Q8_0: return kKvQ8_0;
      default:
        std::fprintf(stderr, "tokenhive cuda: KV cache type %s is not supported\n",
                     std::string(dtype_name(t)).c_str());
        std::abort();
    }
  }

  // The device copy of w, uploaded on first use.
  const DeviceWeight& weight(const WeightView& w) {
    const auto key = std::make_tuple(w.data, static_cast<uint32_t>(w.type), w.rows, w.cols);
    auto it = weights_.find(key);
    if (it != weights_.end()) return it->second;
    DeviceWeight dw;
    if (!cuda::device_weight_type(w.type, &dw.type)) {
      std::fprintf(stderr, "tokenhive cuda: weight type %s cannot be computed with\n",
                   std::string(dtype_name(w.type)).c_str());
      std::abort();
    }
    const std::vector<uint8_t> image = cuda::device_weight_image(w);
    TH_CUDA_CHECK(cudaMalloc(&dw.data, image.size() < 1 ? 1 : image.size()));
    if (!image.empty()) TH_CUDA_CHECK(cudaMemcpy(dw.data, image.data(), image.size(), cudaMemcpyHostToDevice));
    return weights_.emplace(key, dw).first->second;
  }

  int device_;
  cublasHandle_t blas_ = nullptr;
  std::map<std::tuple<const void*, uint32_t, int64_t, int64_t>, DeviceWeight> weights_;
  Scratch widened_, a_, b_, c_, d_, e_;
};

}  // namespace

Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaBackendOptions& options) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // reset the runtime's last-error state
    return Status::errorf("no CUDA device: cudaGetDeviceCount failed: ", cudaGetErrorString(e));
  }
  if (n == 0) return Status::error("no CUDA device: cudaGetDeviceCount found none");
  if (options.device < 0 || options.device >= n)
    return Status::errorf("no CUDA device: device ", options.device, " asked for, ", n, " visible");
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(options.device));
}

std::vector<std::string> cuda_devices() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return {cat("no CUDA device: cudaGetDeviceCount failed: ", cudaGetErrorString(e))};
  }
  if (n == 0) return {"no CUDA device: cudaGetDeviceCount found none"};
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
      out.push_back(cat(i, ": (properties unavailable)"));
      continue;
    }
    out.push_back(cat(i, ": ", p.name, ", sm_", p.major, p.minor, ", ", p.totalGlobalMem >> 30, " GiB, ",
                      p.multiProcessorCount, " SMs"));
  }
  return out;
}

}  // namespace th
