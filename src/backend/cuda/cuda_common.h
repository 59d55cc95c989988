// What the CUDA backend's translation units share (included by .cu files only: it
// names CUDA's types): error checks that abort naming the call, device scratch
// buffers, the device form of a weight, and 16-byte chunks of 16-bit values widened.
#pragma once

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/weight_plan.h"

namespace th::cuda {

/// Prints "tokenhive cuda: WHAT failed at FILE:LINE: ERR" and aborts (the Backend interface
/// returns nothing, so a failed CUDA call cannot be handed back).
[[noreturn]] void die(const char* what, const char* err, const char* file, int line);

#define TH_CUDA_CHECK(call)                                                                 \
  do {                                                                                      \
    cudaError_t th_err_ = (call);                                                                \
    if (th_err_ != cudaSuccess) ::th::cuda::die(#call, cudaGetErrorString(th_err_), __FILE__, __LINE__); \
  } while (0)

#define TH_CUBLAS_CHECK(call)                                                                    \
  do {                                                                                           \
    cublasStatus_t th_st_ = (call);                                                                  \
    if (th_st_ != CUBLAS_STATUS_SUCCESS) ::th::cuda::die(#call, cublasGetStatusString(th_st_), __FILE__, __LINE__); \
  } while (0)

#define TH_LAUNCH_CHECK(name) TH_CUDA_CHECK(cudaGetLastError())

constexpr int kThreads = 256;

inline int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 * 32 ? 65535 * 32 : b));
}

/// A growable device buffer, contents undefined after growing.
struct Scratch {
  void* p = nullptr;
  size_t cap = 0;
  void* ensure(size_t bytes) {
    if (bytes <= cap) return p;
    if (p) TH_CUDA_CHECK(cudaFree(p));  // cudaFree waits for the kernels that may read it
    p = nullptr;
    cap = 0;
    TH_CUDA_CHECK(cudaMalloc(&p, bytes < 256 ? 256 : bytes));
    cap = bytes < 256 ? 256 : bytes;
    return p;
  }
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    if (p) cudaFree(p);  // no check: destructors run at exit too, when the context may be gone
  }
};

/// A weight in device memory (weight_plan.h says which form each file type takes).
struct DeviceWeight {
  DeviceWeightType type = DeviceWeightType::F32;
  void* data = nullptr;              // rows x cols elements of type, row-major
  const uint8_t* scales = nullptr;   // FP8: one scale exponent per block of 32, row-major
  int64_t rows = 0, cols = 0;
};

/// Eight f16 values (a 16-byte load) as f32, in order; exact.
__device__ inline void f16x8_to_f32(const uint4& v, float* out) {
  const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    out[2 * i] = f.x, out[2 * i + 1] = f.y;
  }
}

/// Eight bf16 values (a 16-byte load) as f32, in order: bf16 is f32's upper half.
__device__ inline void bf16x8_to_f32(const uint4& v, float* out) {
  const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(u[i] << 16);
    out[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
  }
}

/// 2^(e-127) for a scale exponent e in [1, 246] (tensor/fp8.h's blocks): a normal f32.
__device__ inline float fp8_block_scale(uint8_t e) { return __uint_as_float(static_cast<uint32_t>(e) << 23); }

}  // namespace th::cuda
