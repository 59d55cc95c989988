// make_cuda_backend when tokenhive is built without CUDA (TH_CUDA off): it refuses.
// CMake leaves this file out when cuda_backend.cu is built.
#include "backend/cuda/cuda_backend.h"

namespace th {

Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaBackendOptions&) {
  return Status::error("built without CUDA (configure with -DTH_CUDA=ON and a CUDA toolkit)");
}

Result<double> cuda_read_bandwidth_gbps(size_t, int) {
  return Status::error("built without CUDA (configure with -DTH_CUDA=ON and a CUDA toolkit)");
}

std::vector<std::string> cuda_devices() { return {"built without CUDA"}; }

}  // namespace th
