// The CUDA devices, as diagnostics and benchmarks see them: cuda_devices() and the memory
// read bandwidth probe (cuda_backend.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.h"

namespace th {

namespace {
// Reads n 16-byte words once; the XOR of everything a thread read is stored only if it is a
// value no test data makes, so the loads cannot be dropped.
__global__ void read_probe_kernel(const uint4* p, int64_t n, uint32_t* sink) {
  uint32_t acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}
}  // namespace

Result<double> cuda_read_bandwidth_gbps(size_t bytes, int reps) {
  int n_dev = 0;
  if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
    cudaGetLastError();
    return Status::error("no CUDA device");
  }
  const int64_t words = static_cast<int64_t>(bytes / 16);
  if (words < 1 || reps < 1) return Status::error("cuda_read_bandwidth_gbps: nothing to read");
  cudaDeviceProp prop{};
  TH_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  void* buf = nullptr;
  TH_CUDA_CHECK(cudaMalloc(&buf, static_cast<size_t>(words) * 16 + 16));
  TH_CUDA_CHECK(cudaMemset(buf, 0x5a, static_cast<size_t>(words) * 16 + 16));
  uint32_t* sink = reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(buf) + words * 16);
  cudaEvent_t a, b;
  TH_CUDA_CHECK(cudaEventCreate(&a));
  TH_CUDA_CHECK(cudaEventCreate(&b));
  const int blocks = prop.multiProcessorCount * 8;
  double best = 0;
  for (int r = 0; r <= reps; ++r) {  // the first pass warms up and is not counted
    TH_CUDA_CHECK(cudaEventRecord(a));
    read_probe_kernel<<<blocks, 512>>>(static_cast<const uint4*>(buf), words, sink);
    TH_LAUNCH_CHECK("read_probe");
    TH_CUDA_CHECK(cudaEventRecord(b));
    TH_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    TH_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (r > 0 && ms > 0) best = std::max(best, static_cast<double>(words) * 16 / (ms * 1e-3) / 1e9);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  TH_CUDA_CHECK(cudaFree(buf));
  return best;
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
