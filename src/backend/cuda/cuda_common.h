// What the CUDA backend's translation units share (included by .cu files only: it
// names CUDA's types): error checks that abort naming the call, device scratch
// buffers, the device form of a weight.
#pragma once

#include <cublas_v2.h>
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

}  // namespace th::cuda
