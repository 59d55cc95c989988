// The CUDA backend: every op of backend.h on the device, mirroring
// backend/cpu/reference_backend.cpp op by op. One plain kernel per op on the
// legacy default stream (so every op is ordered after the previous one), fp32
// arithmetic outside the products; products as cuda_matmul.h says (our own
// kernel reading the weight in its device form, or tensor cores for 16-bit and
// fp8 weights at more than 8 tokens). The small host arrays of each call go over
// without stopping the device (cuda_uploads.h): a step's kernels queue up and
// the host waits only where it reads a result (`read`).
//
// Errors: the Backend interface returns nothing, so a failed CUDA or cuBLAS
// call (or a failed launch, checked after every launch) aborts with a message
// naming the call and CUDA's error string. make_cuda_backend returns errors as
// values ("no CUDA device: ...").
//
// Host and device memory: activations, KV pools and buffers from alloc() are
// device memory. Everything else the interface passes is host memory: weights
// (uploaded once, see cuda_backend.h), norm weights, biases, freq_factors, ids,
// positions, slots and block tables (norm weights, biases and rope frequencies
// kept on the device while their bytes stay the same; the rest staged at each call).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_matmul.h"
#include "backend/cuda/cuda_step.h"
#include "backend/cuda/cuda_uploads.h"
#include "backend/cuda/weight_plan.h"
#include "tensor/quant.h"

namespace th {

namespace cuda {
void die(const char* what, const char* err, const char* file, int line) {
  std::fprintf(stderr, "tokenhive cuda: %s failed at %s:%d: %s\n", what, file, line, err);
  std::abort();
}
}  // namespace cuda

namespace {

using cuda::blocks_for;
using cuda::kThreads;

// ---- kernels ---------------------------------------------------------------------------

// One block per row; THREADS by the row's length (a row of 4,096 on one multiprocessor is
// latency: 1,024 threads keep four times the loads in flight of 256). Lanes' squares summed by a
// butterfly, then the warps' in order.
template <int THREADS>
__global__ void __launch_bounds__(THREADS) rmsnorm_kernel(const float* x, const float* w, float* y, int64_t dim,
                                                         float eps) {
  __shared__ float warp_sums[THREADS / 32];
  const float* xr = x + blockIdx.x * dim;
  float* yr = y + blockIdx.x * dim;
  float ss = 0;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < dim; i += THREADS) ss = fmaf(xr[i], xr[i], ss);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0;
#pragma unroll
  for (int i = 0; i < THREADS / 32; ++i) total += warp_sums[i];
  const float scale = 1.0f / sqrtf(total / static_cast<float>(dim) + eps);
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < dim; i += THREADS) yr[i] = xr[i] * scale * w[i];
}

// The elementwise kernels below loop grid-stride: any n works with any grid.

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

// q . K row over head_dim, the K row at krow + base elements (kv_load's types).
__device__ float kv_dot(const float* q, const uint8_t* krow, int kt, int64_t base, int64_t head_dim) {
  float s = 0;
  if ((kt == kKvF16 || kt == kKvBF16) && head_dim % 8 == 0 &&
      reinterpret_cast<uintptr_t>(krow + base * 2) % 16 == 0) {  // 16-byte loads of 8 elements
    const uint4* k4 = reinterpret_cast<const uint4*>(krow + base * 2);
    for (int64_t c = 0; c < head_dim / 8; ++c) {
      float k[8];
      if (kt == kKvF16)
        cuda::f16x8_to_f32(k4[c], k);
      else
        cuda::bf16x8_to_f32(k4[c], k);
#pragma unroll
      for (int i = 0; i < 8; ++i) s = fmaf(q[8 * c + i], k[i], s);
    }
    return s;
  }
  for (int64_t i = 0; i < head_dim; ++i) s = fmaf(q[i], kv_load(krow, kt, base + i), s);
  return s;
}

// One block of kAttnWarps warps per (token, head). Warp w takes the chunks of 32 positions
// w, w + kAttnWarps, ...: lane j scores position j of the chunk (its own K row, q from shared
// memory), the warp updates its online softmax once per chunk (running max m, sum l), then
// adds the chunk's V rows weighted by their exponentials to its accumulator (head_dim over the
// lanes: coalesced loads, none waiting on another). The warps' results are merged in a fixed
// order through shared memory. Every sum's order depends on the token's positions alone, so a
// token's output does not depend on its batch.
__global__ void attention_kernel(const uint8_t* k_pool, const uint8_t* v_pool, int64_t row_bytes, int kt,
                                 const float* q, float* out, const int32_t* token_seq, const int32_t* token_pos,
                                 const int32_t* table_offsets, const int32_t* tables, int64_t block_size,
                                 int64_t n_heads, int64_t group, int64_t head_dim, float scale, int64_t window,
                                 float softcap) {
  const int64_t t = blockIdx.x / n_heads, h = blockIdx.x % n_heads;
  const int64_t kvh = h / group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __shared__ float sq[kMaxHeadDim];
  const float* qh = q + (t * n_heads + h) * head_dim;
  for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) sq[i] = qh[i];
  __syncthreads();
  const int32_t* table = tables + table_offsets[token_seq[t]];
  const int64_t n_pos = static_cast<int64_t>(token_pos[t]) + 1;

  float m = -INFINITY, l = 0;
  float acc[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) acc[j] = 0;

  const int64_t p_begin = window > 0 ? (n_pos > window ? n_pos - window : 0) : 0;  // sliding window
  for (int64_t p0 = p_begin + 32 * warp; p0 < n_pos; p0 += 32 * kAttnWarps) {
    const int64_t p = p0 + lane;
    const bool valid = p < n_pos;
    // kv_slot (backend.h), on the device.
    const int64_t slot = valid ? static_cast<int64_t>(table[p / block_size]) * block_size + p % block_size : 0;
    float s = -INFINITY;
    if (valid) {
      s = kv_dot(sq, k_pool + slot * row_bytes, kt, kvh * head_dim, head_dim) * scale;
      if (softcap > 0) s = softcap * tanhf(s / softcap);
    }
    float mc = s;
#pragma unroll
    for (int off = 16; off > 0; off /= 2) mc = fmaxf(mc, __shfl_xor_sync(0xffffffffu, mc, off));
    const float m_new = fmaxf(m, mc);       // finite: the chunk has a valid position
    const float corr = expf(m - m_new);     // 0 on the first chunk (m = -inf)
    const float e = valid ? expf(s - m_new) : 0.0f;
    float es = e;
#pragma unroll
    for (int off = 16; off > 0; off /= 2) es += __shfl_xor_sync(0xffffffffu, es, off);
    l = l * corr + es;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) acc[j] *= corr;
    const int n_valid = static_cast<int>(n_pos - p0 < 32 ? n_pos - p0 : 32);
    for (int i = 0; i < n_valid; ++i) {
      const float ei = __shfl_sync(0xffffffffu, e, i);
      const int64_t si = __shfl_sync(0xffffffffu, slot, i);
      const uint8_t* vrow = v_pool + si * row_bytes;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int64_t d = lane + 32 * j;
        if (d < head_dim) acc[j] = fmaf(ei, kv_load(vrow, kt, kvh * head_dim + d), acc[j]);
      }
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

// Ops record their launches (cuda_step.h): `launch(key parts..., kernel launch)`.
class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, bool graphs)
      : device_(device),
        staging_([this] { flush(); }),
        consts_([this] { flush(); sync(); }) {
    TH_CUDA_CHECK(cudaSetDevice(device));
    TH_CUDA_CHECK(cudaStreamCreate(&s_));  // a blocking stream: the legacy stream's copies wait for it
    launches_ = std::make_unique<cuda::Launches>(s_, graphs);
    TH_CUBLAS_CHECK(cublasCreate(&blas_));
    TH_CUBLAS_CHECK(cublasSetStream(blas_, s_));
    // A workspace of our own, so that cuBLAS allocates nothing while a graph is captured.
    TH_CUDA_CHECK(cudaMalloc(&blas_workspace_, kBlasWorkspace));
    TH_CUBLAS_CHECK(cublasSetWorkspace(blas_, blas_workspace_, kBlasWorkspace));
    // Tensor cores for 16-bit inputs; cuBLAS sees no f32 products (cuda_matmul.h).
    TH_CUBLAS_CHECK(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));
    matmul_ = std::make_unique<cuda::Matmul>(blas_, s_);
  }
  ~CudaBackend() override {
    flush();
    cudaStreamSynchronize(s_);
    matmul_.reset();
    launches_.reset();
    for (auto& kv : weights_) cudaFree(kv.second.data);
    cublasDestroy(blas_);
    cudaFree(blas_workspace_);
    cudaStreamDestroy(s_);
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
    flush();
    if (p) TH_CUDA_CHECK(cudaFree(p));
  }
  // The legacy stream's copies wait for s_'s work: the results are there.
  void read(const float* src, float* dst, int64_t n) override {
    flush();
    if (n > 0) TH_CUDA_CHECK(cudaMemcpy(dst, src, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost));
  }
  void copy_to_host(const void* src, void* dst, size_t bytes) override {
    flush();
    if (bytes) TH_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }
  void copy_from_host(const void* src, void* dst, size_t bytes) override {
    flush();
    if (bytes) TH_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }

  void matmul(const WeightView& w, const float* x, float* y, int64_t n) override {
    if (n <= 0 || w.rows <= 0) return;
    const cuda::DeviceWeight* dw = &weight(w);
    const void* scratch = matmul_->reserve(*dw, n, [this] { flush(); sync(); });
    launch(kMatmul, dw->data, x, y, n, scratch, [=, m = matmul_.get()] { m->run(*dw, x, y, n); });
  }

  // One launch for a layer's q, k, v (gate, up) where Matmul::fuses them; else one each.
  void matmuls(std::span<const MatmulJob> jobs, const float* x, int64_t n) override {
    const int k = static_cast<int>(jobs.size());
    const cuda::DeviceWeight* ws[cuda::kMaxJobs] = {};
    float* ys[cuda::kMaxJobs] = {};
    bool fused = k >= 2 && k <= cuda::kMaxJobs && n > 0;
    for (int j = 0; fused && j < k; ++j) {
      fused = jobs[j].w->rows > 0;
      ws[j] = fused ? &weight(*jobs[j].w) : nullptr;
      ys[j] = jobs[j].y;
    }
    if (!fused || !cuda::Matmul::fuses(ws, k, n)) return Backend::matmuls(jobs, x, n);
    cuda::LaunchKey parts;
    for (int j = 0; j < k; ++j) parts.mix_all(ws[j]->data, ys[j]);
    launch(kMatmuls, parts.h, x, n, [=, m = matmul_.get()] { m->run_fused(ws, ys, k, x, n); });
  }

  // Rows are dequantized on the host with the reference dequantizer (exact, as the reference).
  void embed(const WeightView& w, const int32_t* ids, int64_t n, float* out) override {
    if (n <= 0) return;
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
    const float* rows = put(host.data(), static_cast<int64_t>(host.size()));
    const size_t bytes = host.size() * sizeof(float);
    launch(kEmbed, out, bytes, [=, s = s_] {
      TH_CUDA_CHECK(cudaMemcpyAsync(out, rows, bytes, cudaMemcpyDeviceToDevice, s));
    });
  }

  void rmsnorm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t dim, float eps) override {
    if (n_rows <= 0) return;
    const float* dw = consts_.by_address(weight, dim);
    launch(kRmsnorm, x, dw, y, n_rows, dim, eps, [=, s = s_] {
      if (dim >= 2048)
        rmsnorm_kernel<1024><<<static_cast<unsigned>(n_rows), 1024, 0, s>>>(x, dw, y, dim, eps);
      else
        rmsnorm_kernel<256><<<static_cast<unsigned>(n_rows), 256, 0, s>>>(x, dw, y, dim, eps);
      TH_LAUNCH_CHECK("rmsnorm");
    });
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
    const float* d_inv = consts_.by_bytes(inv_freq.data(), half);
    const int32_t* d_pos = put(pos, n_tokens);
    const float fs = p.freq_scale;
    const bool neox = p.neox;
    launch(kRope, x, d_inv, n_tokens, n_heads, head_dim, half, fs, neox, [=, s = s_] {
      rope_kernel<<<blocks_for(n_tokens * n_heads * half), kThreads, 0, s>>>(x, d_pos, d_inv, n_tokens, n_heads,
                                                                          head_dim, half, fs, neox);
      TH_LAUNCH_CHECK("rope");
    });
  }

  void swiglu(const float* gate, const float* up, float* out, int64_t n) override {
    if (n <= 0) return;
    launch(kSwiglu, gate, up, out, n, [=, s = s_] {
      swiglu_kernel<<<blocks_for(n), kThreads, 0, s>>>(gate, up, out, n);
      TH_LAUNCH_CHECK("swiglu");
    });
  }

  void geglu(const float* gate, const float* up, float* out, int64_t n) override {
    if (n <= 0) return;
    launch(kGeglu, gate, up, out, n, [=, s = s_] {
      geglu_kernel<<<blocks_for(n), kThreads, 0, s>>>(gate, up, out, n);
      TH_LAUNCH_CHECK("geglu");
    });
  }

  void softcap(float* y, int64_t n, float cap) override {
    if (n <= 0) return;
    launch(kSoftcap, y, n, cap, [=, s = s_] {
      softcap_kernel<<<blocks_for(n), kThreads, 0, s>>>(y, n, cap);
      TH_LAUNCH_CHECK("softcap");
    });
  }

  void scale(float* y, int64_t n, float f) override {
    if (n <= 0) return;
    launch(kScale, y, n, f, [=, s = s_] {
      scale_kernel<<<blocks_for(n), kThreads, 0, s>>>(y, n, f);
      TH_LAUNCH_CHECK("scale");
    });
  }

  void add_rows_scaled(float* dst, const float* src, const int32_t* idx, const float* w, int64_t n,
                       int64_t dim) override {
    if (n <= 0 || dim <= 0) return;
    staging_.make_room({static_cast<size_t>(n) * 4, static_cast<size_t>(n) * 4});
    const int32_t* d_idx = put(idx, n);
    const float* d_w = put(w, n);
    launch(kAddRowsScaled, dst, src, n, dim, [=, s = s_] {
      add_rows_scaled_kernel<<<blocks_for(n * dim), kThreads, 0, s>>>(dst, src, d_idx, d_w, n, dim);
      TH_LAUNCH_CHECK("add_rows_scaled");
    });
  }

  void gather_rows(const float* src, const int32_t* idx, int64_t n, int64_t dim, float* dst) override {
    if (n <= 0 || dim <= 0) return;
    const int32_t* d_idx = put(idx, n);
    launch(kGather, src, n, dim, dst, [=, s = s_] {
      gather_kernel<<<blocks_for(n * dim), kThreads, 0, s>>>(src, d_idx, n, dim, dst);
      TH_LAUNCH_CHECK("gather_rows");
    });
  }

  void add(float* y, const float* x, int64_t n) override {
    if (n <= 0) return;
    launch(kAdd, y, x, n, [=, s = s_] {
      add_kernel<<<blocks_for(n), kThreads, 0, s>>>(y, x, n);
      TH_LAUNCH_CHECK("add");
    });
  }

  void add_bias(float* y, const float* bias, int64_t n_rows, int64_t dim) override {
    if (n_rows <= 0 || dim <= 0) return;
    const float* d_bias = consts_.by_address(bias, dim);
    launch(kAddBias, y, d_bias, n_rows, dim, [=, s = s_] {
      add_bias_kernel<<<blocks_for(n_rows * dim), kThreads, 0, s>>>(y, d_bias, n_rows * dim, dim);
      TH_LAUNCH_CHECK("add_bias");
    });
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
    const int32_t* d_slots = put(b.token_slot, b.n_tokens);
    auto* kp = static_cast<uint8_t*>(kv.k);
    auto* vp = static_cast<uint8_t*>(kv.v);
    const int64_t n = b.n_tokens, dim = kv.kv_dim, rbi = static_cast<int64_t>(rb);
    launch(kKvWrite, kp, vp, k, v, n, dim, kt, [=, s = s_] {
      kv_write_kernel<<<blocks_for(n * dim), kThreads, 0, s>>>(kp, vp, k, v, d_slots, n, dim, rbi, kt);
      TH_LAUNCH_CHECK("kv_write");
    });
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
    const size_t nt = static_cast<size_t>(b.n_tokens) * 4;
    staging_.make_room({nt, nt, offsets.size() * 4, flat.size() * 4});
    const int32_t* d_seq = put(b.token_seq, b.n_tokens);
    const int32_t* d_pos = put(b.token_pos, b.n_tokens);
    const int32_t* d_off = put(offsets.data(), static_cast<int64_t>(offsets.size()));
    const int32_t* d_tab = put(flat.data(), static_cast<int64_t>(flat.size()));
    const auto* kp = static_cast<const uint8_t*>(kv.k);
    const auto* vp = static_cast<const uint8_t*>(kv.v);
    const int64_t rb = static_cast<int64_t>(kv.row_bytes()), n = b.n_tokens, bs = b.block_size;
    const int kt = kv_type(kv.type);
    const int64_t group = n_heads / n_kv_heads, window = opt.window;
    const float cap = opt.softcap;
    launch(kAttention, kp, vp, rb, kt, q, out, n, bs, n_heads, group, head_dim, scale, window, cap, [=, s = s_] {
      attention_kernel<<<static_cast<unsigned>(n * n_heads), kAttnWarps * 32, 0, s>>>(
          kp, vp, rb, kt, q, out, d_seq, d_pos, d_off, d_tab, bs, n_heads, group, head_dim, scale, window, cap);
      TH_LAUNCH_CHECK("attention");
    });
  }

 private:
  static constexpr size_t kBlasWorkspace = size_t{32} << 20;
  enum Op : int {
    kMatmul = 1, kEmbed, kRmsnorm, kRope, kSwiglu, kGeglu, kSoftcap, kScale, kAddRowsScaled, kGather, kAdd,
    kAddBias, kKvWrite, kAttention, kMatmuls
  };

  // Records a launch: its key parts (everything it is launched with, besides staged arrays,
  // which put() keys), then the launch itself (the last argument).
  template <class... A>
  void launch(Op op, A&&... a) {
    launch_impl(op, std::forward_as_tuple(std::forward<A>(a)...), std::make_index_sequence<sizeof...(A) - 1>{});
  }
  template <class Tuple, size_t... I>
  void launch_impl(Op op, Tuple&& t, std::index_sequence<I...>) {
    launches_->key().mix_all(op, std::get<I>(t)...);
    launches_->add(std::move(std::get<sizeof...(I)>(t)));
  }
  template <class T>
  const T* put(const T* host, int64_t n) {
    return staging_.put(host, n, launches_->key());
  }
  // Runs what was recorded: the staged bytes over, then the launches.
  void flush() {
    if (launches_->empty()) return;
    staging_.send(s_);
    launches_->run();
  }
  void sync() { TH_CUDA_CHECK(cudaStreamSynchronize(s_)); }

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
  const cuda::DeviceWeight& weight(const WeightView& w) {
    const auto key = std::make_tuple(w.data, static_cast<uint32_t>(w.type), w.rows, w.cols);
    auto it = weights_.find(key);
    if (it != weights_.end()) return it->second;
    cuda::DeviceWeight dw;
    dw.rows = w.rows;
    dw.cols = w.cols;
    if (!cuda::device_weight_type(w.type, &dw.type)) {
      std::fprintf(stderr, "tokenhive cuda: weight type %s cannot be computed with\n",
                   std::string(dtype_name(w.type)).c_str());
      std::abort();
    }
    const std::vector<uint8_t> image = cuda::device_weight_image(w);
    TH_CUDA_CHECK(cudaMalloc(&dw.data, image.size() < 1 ? 1 : image.size()));
    if (!image.empty()) TH_CUDA_CHECK(cudaMemcpy(dw.data, image.data(), image.size(), cudaMemcpyHostToDevice));
    if (dw.type == cuda::DeviceWeightType::FP8)
      dw.scales = static_cast<const uint8_t*>(dw.data) + cuda::fp8_scales_offset(w.rows, w.cols);
    return weights_.emplace(key, dw).first->second;
  }

  int device_;
  cudaStream_t s_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void* blas_workspace_ = nullptr;
  std::map<std::tuple<const void*, uint32_t, int64_t, int64_t>, cuda::DeviceWeight> weights_;
  std::unique_ptr<cuda::Matmul> matmul_;
  std::unique_ptr<cuda::Launches> launches_;
  cuda::Staging staging_;
  cuda::ConstCache consts_;
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
  const char* graphs = std::getenv("TOKENHIVE_CUDA_GRAPHS");
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(options.device, !(graphs && std::string(graphs) == "0")));
}

}  // namespace th
