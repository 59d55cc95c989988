// The CUDA backend's products: cuda_matmul.h says which path runs when.
#include "backend/cuda/cuda_matmul.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <type_traits>

namespace th::cuda {

namespace {

constexpr int kRowsPerBlock = 4;  // one warp a row

// Chunks of its row a lane loads before it multiplies: as many 16-byte loads in flight as
// the registers allow (each chunk holds 4 until it is used), fewer where more tokens' sums
// take registers too.
template <int NT>
__host__ __device__ constexpr int unroll_for() {
  return NT <= 2 ? 16 : NT <= 4 ? 8 : 4;
}

// How a lane reads its part of a row: chunks of kVec elements (16 bytes, `load`, then
// `decode`) on the fast path, single elements (`one`) where the row is not a whole number of
// aligned chunks. kScaled: the chunk's values are decode's times a power of two (`scale`).
template <class WT>
struct Chunks {
  __device__ static uint4 load(const WT* w, int64_t c) { return __ldg(reinterpret_cast<const uint4*>(w + c)); }
};

template <class WT>
struct Row;

template <>
struct Row<float> : Chunks<float> {
  static constexpr int kVec = 4;
  static constexpr bool kScaled = false;
  __device__ static void decode(const uint4& v, float* out) {
    out[0] = __uint_as_float(v.x), out[1] = __uint_as_float(v.y);
    out[2] = __uint_as_float(v.z), out[3] = __uint_as_float(v.w);
  }
  __device__ static float one(const float* w, const uint8_t*, int64_t c) { return __ldg(w + c); }
};

template <>
struct Row<__half> : Chunks<__half> {
  static constexpr int kVec = 8;
  static constexpr bool kScaled = false;
  __device__ static void decode(const uint4& v, float* out) { f16x8_to_f32(v, out); }
  __device__ static float one(const __half* w, const uint8_t*, int64_t c) { return __half2float(w[c]); }
};

template <>
struct Row<__nv_bfloat16> : Chunks<__nv_bfloat16> {
  static constexpr int kVec = 8;
  static constexpr bool kScaled = false;
  __device__ static void decode(const uint4& v, float* out) { bf16x8_to_f32(v, out); }
  __device__ static float one(const __nv_bfloat16* w, const uint8_t*, int64_t c) { return __bfloat162float(w[c]); }
};

// fp8 codes (one byte each) with one scale exponent e per block of 32: value = code * 2^(e-127).
// A chunk of 16 lies in one block. Rows are whole blocks, so every row takes the fast path.
template <>
struct Row<uint8_t> : Chunks<uint8_t> {
  static constexpr int kVec = 16;
  static constexpr bool kScaled = true;
  __device__ static void decode(const uint4& v, float* out) {
    const uint16_t* pairs = reinterpret_cast<const uint16_t*>(&v);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(pairs[i], __NV_E4M3);  // exact
      const float2 f = __half22float2(__half2(h));
      out[2 * i] = f.x, out[2 * i + 1] = f.y;
    }
  }
  __device__ static float scale(uint8_t e) { return fp8_block_scale(e); }
  __device__ static float one(const uint8_t* w, const uint8_t* scales, int64_t c) {
    float out[16];
    decode(load(w, c / 16 * 16), out);
    return out[c % 16] * scale(__ldg(scales + c / 32));  // exact: a power of two
  }
};

// The products of one launch: up to kMaxJobs weights of the same type and cols, all with the
// same activations (a layer's q, k, v; its gate and up); their rows one after another.
struct GemvJobs {
  const void* w[kMaxJobs];
  const uint8_t* scales[kMaxJobs];
  float* y[kMaxJobs];
  int64_t rows[kMaxJobs];
  int64_t first_row[kMaxJobs + 1];  // job j's rows are first_row[j] .. first_row[j + 1] - 1
  int n_jobs;
};

// y[t][r] for NT tokens starting at blockIdx.y * NT, for each row r of the jobs. A row is
// summed by kSplit warps (1, or 4 for long rows), each over its own contiguous part of the
// row's chunks: lane l of a part sums its chunks l, l + 32, l + 64, ... in that order (kVec
// elements each, in order; an fp8 chunk's products summed first, then scaled, which rounds
// as scaling each would: a power of two), loading unroll_for<NT> chunks before it
// multiplies; the warp adds its lanes by a butterfly, then the parts are added in order.
// The order of every sum depends on cols alone.
template <class WT, int NT, bool kVecPath, int kSplit>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    gemv_kernel(const GemvJobs jobs, const float* __restrict__ x, int64_t cols) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, part = warp % kSplit;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * (kRowsPerBlock / kSplit) + warp / kSplit;
  int j = 0;
  while (j + 1 < jobs.n_jobs && g >= jobs.first_row[j + 1]) ++j;
  const bool live = g < jobs.first_row[jobs.n_jobs];
  const int64_t r = g - jobs.first_row[j], rows = jobs.rows[j];
  x += static_cast<int64_t>(blockIdx.y) * NT * cols;
  const WT* wr = static_cast<const WT*>(jobs.w[j]) + r * cols;
  const uint8_t* sr = jobs.scales[j] ? jobs.scales[j] + r * (cols / 32) : nullptr;
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0;
  if (!live) {
  } else if constexpr (kVecPath) {
    constexpr int V = Row<WT>::kVec, U = unroll_for<NT>();
    const int64_t n_chunks = cols / V, per = (n_chunks + kSplit - 1) / kSplit;
    const int64_t begin = part * per, end = begin + per < n_chunks ? begin + per : n_chunks;
    for (int64_t k0 = begin + lane; k0 < end; k0 += 32 * U) {
      uint4 raw[U];
      uint8_t e[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t k = k0 + 32 * u;
        if (k < end) {
          raw[u] = Row<WT>::load(wr, k * V);
          if constexpr (Row<WT>::kScaled) e[u] = __ldg(sr + k * V / 32);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t k = k0 + 32 * u;
        if (k >= end) break;
        float wv[V];
        Row<WT>::decode(raw[u], wv);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          const float4* xp = reinterpret_cast<const float4*>(x + t * cols + k * V);
          float p = 0;
          float& a = Row<WT>::kScaled ? p : acc[t];
#pragma unroll
          for (int q = 0; q < V / 4; ++q) {
            const float4 xv = __ldg(xp + q);
            a = fmaf(wv[4 * q], xv.x, a);
            a = fmaf(wv[4 * q + 1], xv.y, a);
            a = fmaf(wv[4 * q + 2], xv.z, a);
            a = fmaf(wv[4 * q + 3], xv.w, a);
          }
          if constexpr (Row<WT>::kScaled) acc[t] = fmaf(p, Row<WT>::scale(e[u]), acc[t]);
        }
      }
    }
  } else {
    for (int64_t c = lane; c < cols; c += 32) {
      const float wc = Row<WT>::one(wr, sr, c);
#pragma unroll
      for (int t = 0; t < NT; ++t) acc[t] = fmaf(wc, __ldg(x + t * cols + c), acc[t]);
    }
  }
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int off = 16; off > 0; off /= 2) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], off);
  float* y = jobs.y[j] + static_cast<int64_t>(blockIdx.y) * NT * rows;
  if constexpr (kSplit == 1) {
    if (live && lane == 0)
#pragma unroll
      for (int t = 0; t < NT; ++t) y[t * rows + r] = acc[t];
  } else {
    __shared__ float parts[kRowsPerBlock][NT];
    if (lane == 0)
#pragma unroll
      for (int t = 0; t < NT; ++t) parts[warp][t] = acc[t];
    __syncthreads();
    if (live && lane == 0 && part == 0)
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        float sum = parts[warp][t];
        for (int q = 1; q < kSplit; ++q) sum += parts[warp + q][t];
        y[t * rows + r] = sum;
      }
  }
}

// Rows of at least this many 16-byte chunks are split over 4 warps (Llama-3-8B's down
// projection: 1,792 bf16 chunks): one warp a row leaves too few loads in flight.
constexpr int64_t kSplitChunks = 1024;

template <class WT, int NT>
void launch_gemv_tiles(const GemvJobs& jobs, const float* x, int64_t cols, int64_t tiles, bool vec, cudaStream_t s) {
  const bool split = vec && cols / Row<WT>::kVec >= kSplitChunks;
  const int64_t rows = jobs.first_row[jobs.n_jobs], per_block = split ? 1 : kRowsPerBlock;
  const dim3 grid(static_cast<unsigned>((rows + per_block - 1) / per_block), static_cast<unsigned>(tiles));
  if (split)
    gemv_kernel<WT, NT, true, 4><<<grid, kRowsPerBlock * 32, 0, s>>>(jobs, x, cols);
  else if (vec)
    gemv_kernel<WT, NT, true, 1><<<grid, kRowsPerBlock * 32, 0, s>>>(jobs, x, cols);
  else
    gemv_kernel<WT, NT, false, 1><<<grid, kRowsPerBlock * 32, 0, s>>>(jobs, x, cols);
  TH_LAUNCH_CHECK("gemv");
}

template <class WT>
void gemv_typed(GemvJobs jobs, const float* x, int64_t cols, int64_t n, cudaStream_t s) {
  // The fast path needs 16-byte aligned chunks: whole chunks per row, aligned bases, and
  // activation rows of a multiple of 4 floats. It depends on the shapes and the buffers
  // (from alloc: 256-byte aligned), never on n.
  constexpr int V = Row<WT>::kVec;
  bool vec = cols % V == 0 && cols % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  for (int j = 0; j < jobs.n_jobs; ++j) vec = vec && reinterpret_cast<uintptr_t>(jobs.w[j]) % 16 == 0;
  constexpr int64_t T = kGemvMaxTokens;
  const int64_t full = n / T, rest = n % T;
  if (full > 0) launch_gemv_tiles<WT, T>(jobs, x, cols, full, vec, s);
  x += full * T * cols;
  for (int j = 0; j < jobs.n_jobs; ++j) jobs.y[j] += full * T * jobs.rows[j];
  switch (rest) {
    case 1: return launch_gemv_tiles<WT, 1>(jobs, x, cols, 1, vec, s);
    case 2: return launch_gemv_tiles<WT, 2>(jobs, x, cols, 1, vec, s);
    case 3: return launch_gemv_tiles<WT, 3>(jobs, x, cols, 1, vec, s);
    case 4: return launch_gemv_tiles<WT, 4>(jobs, x, cols, 1, vec, s);
    case 5: return launch_gemv_tiles<WT, 5>(jobs, x, cols, 1, vec, s);
    case 6: return launch_gemv_tiles<WT, 6>(jobs, x, cols, 1, vec, s);
    case 7: return launch_gemv_tiles<WT, 7>(jobs, x, cols, 1, vec, s);
    default: return;
  }
}
static_assert(kGemvMaxTokens == 8, "gemv_typed's switch covers 1..kGemvMaxTokens - 1");

template <class T>
__global__ void round_to_16(const float* src, T* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (std::is_same_v<T, __half>) dst[i] = __float2half_rn(src[i]);
    else dst[i] = __float2bfloat16_rn(src[i]);
  }
}

// fp8 codes and scales -> bf16, exactly (3 mantissa bits and an f32 exponent fit in bf16).
__global__ void widen_fp8(const uint8_t* codes, const uint8_t* scales, __nv_bfloat16* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(codes[i], __NV_E4M3);
    dst[i] = __float2bfloat16_rn(__half2float(__half(h)) * fp8_block_scale(scales[i / 32]));
  }
}

}  // namespace

const void* Matmul::reserve(const DeviceWeight& w, int64_t n, const std::function<void()>& before_free) {
  if (n > kGemvMaxTokens && w.type != DeviceWeightType::F32) {
    const size_t xb = static_cast<size_t>(n * w.cols) * 2;
    const size_t wb = w.type == DeviceWeightType::FP8 ? static_cast<size_t>(w.rows * w.cols) * 2 : 0;
    if (xb > x16_.cap || wb > w16_.cap) before_free();
    x16_.ensure(xb);
    if (wb) w16_.ensure(wb);
  }
  return reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(x16_.p) ^ (reinterpret_cast<uintptr_t>(w16_.p) << 1));
}

void Matmul::run(const DeviceWeight& w, const float* x, float* y, int64_t n) {
  if (n <= 0 || w.rows <= 0) return;
  if (w.type == DeviceWeightType::F32 || n <= kGemvMaxTokens) {
    const DeviceWeight* ws[1] = {&w};
    return gemv(ws, &y, 1, x, n);
  }
  tensor_cores(w, x, y, n);
}

bool Matmul::fuses(const DeviceWeight* const* ws, int k, int64_t n) {
  if (k < 2 || k > kMaxJobs) return false;
  for (int j = 0; j < k; ++j)
    if (ws[j]->type != ws[0]->type || ws[j]->cols != ws[0]->cols || ws[j]->rows <= 0) return false;
  return ws[0]->type == DeviceWeightType::F32 || n <= kGemvMaxTokens;
}

void Matmul::run_fused(const DeviceWeight* const* ws, float* const* ys, int k, const float* x, int64_t n) {
  if (n > 0) gemv(ws, ys, k, x, n);
}

void Matmul::gemv(const DeviceWeight* const* ws, float* const* ys, int k, const float* x, int64_t n) {
  GemvJobs jobs{};
  jobs.n_jobs = k;
  for (int j = 0; j < k; ++j) {
    jobs.w[j] = ws[j]->data;
    jobs.scales[j] = ws[j]->scales;
    jobs.y[j] = ys[j];
    jobs.rows[j] = ws[j]->rows;
    jobs.first_row[j + 1] = jobs.first_row[j] + ws[j]->rows;
  }
  const int64_t cols = ws[0]->cols;
  switch (ws[0]->type) {
    case DeviceWeightType::F32: return gemv_typed<float>(jobs, x, cols, n, s_);
    case DeviceWeightType::F16: return gemv_typed<__half>(jobs, x, cols, n, s_);
    case DeviceWeightType::BF16: return gemv_typed<__nv_bfloat16>(jobs, x, cols, n, s_);
    case DeviceWeightType::FP8: return gemv_typed<uint8_t>(jobs, x, cols, n, s_);
  }
}

void Matmul::tensor_cores(const DeviceWeight& w, const float* x, float* y, int64_t n) {
  const int64_t nw = w.rows * w.cols, nx = n * w.cols;
  const void* wp = w.data;
  const bool half = w.type == DeviceWeightType::F16;  // else bf16 (fp8 widened to bf16)
  if (w.type == DeviceWeightType::FP8) {
    auto* wide = static_cast<__nv_bfloat16*>(w16_.ensure(static_cast<size_t>(nw) * 2));
    widen_fp8<<<blocks_for(nw), kThreads, 0, s_>>>(static_cast<const uint8_t*>(w.data), w.scales, wide, nw);
    TH_LAUNCH_CHECK("widen_fp8");
    wp = wide;
  }
  void* xs = x16_.ensure(static_cast<size_t>(nx) * 2);
  if (half)
    round_to_16<__half><<<blocks_for(nx), kThreads, 0, s_>>>(x, static_cast<__half*>(xs), nx);
  else
    round_to_16<__nv_bfloat16><<<blocks_for(nx), kThreads, 0, s_>>>(x, static_cast<__nv_bfloat16*>(xs), nx);
  TH_LAUNCH_CHECK("round_to_16");
  // Row-major W (rows x cols) is column-major cols x rows: Y^T (rows x n, column-major)
  // = W^T' X^T with A = W transposed, B = X^T.
  const cudaDataType t16 = half ? CUDA_R_16F : CUDA_R_16BF;
  const float alpha = 1.0f, beta = 0.0f;
  TH_CUBLAS_CHECK(cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.rows), static_cast<int>(n),
                               static_cast<int>(w.cols), &alpha, wp, t16, static_cast<int>(w.cols), xs, t16,
                               static_cast<int>(w.cols), &beta, y, CUDA_R_32F, static_cast<int>(w.rows),
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace th::cuda
