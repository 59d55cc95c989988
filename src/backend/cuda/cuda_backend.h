// The CUDA backend (issues #8, #24): the Backend interface on an NVIDIA GPU, fp32
// activations in device memory, weights uploaded once (f32/f16/bf16 kept in
// their 16- or 32-bit form, the fp8 compute type's blocks as fp8 codes and
// scales, GGUF quantized types dequantized to f16 on the host), products by our
// own weight-reading kernel for decode and by tensor cores for batches
// (cuda_matmul.h). A plain C++ header: no CUDA types, so every translation unit
// may include it whether or not CUDA was built.
//
// Built when CMake's TH_CUDA is on (cuda_backend.cu); otherwise cuda_stub.cpp
// provides make_cuda_backend that refuses with "built without CUDA".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"

namespace th {

struct CudaBackendOptions {
  int device = 0;  // CUDA device ordinal
};

/// @brief The CUDA backend on options.device, or an error: "built without CUDA", or
/// "no CUDA device: ..." when cudaGetDeviceCount fails or finds none.
/// Contract: a WeightView's data (host memory) must stay alive and unchanged for the
/// backend's lifetime (a GGUF mapping does): it is uploaded on first use, keyed by
/// its address, type and shape. Other host pointers the interface passes (norm weights,
/// biases, freq_factors, ids, positions, tables) are read during the call only (norm
/// weights, biases and rope frequencies are kept on the device and compared with the host's
/// bytes at every call; the rest is copied).
/// TOKENHIVE_CUDA_GRAPHS=0: every step's kernels launched one by one, never replayed as a
/// CUDA graph (cuda_step.h).
Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaBackendOptions& options = {});

/// @brief The read bandwidth of device 0's memory in GB/s: the best of `reps` passes of a
/// kernel that reads `bytes` once (16-byte loads, every multiprocessor busy), timed with
/// CUDA events. An error without a device. What bench model --device cuda divides by.
Result<double> cuda_read_bandwidth_gbps(size_t bytes, int reps);

/// @brief One line per visible device ("0: NVIDIA H200, sm_90, 140 GiB"), or one line that
/// says why there are none. For diagnostics (`tokenhive` may print it).
std::vector<std::string> cuda_devices();

}  // namespace th
