#include "cli/device.h"

#include "backend/cuda/cuda_backend.h"

namespace th::cli {

void add_device_option(CLI::App& app, std::string* device) {
  app.add_option("--device", *device,
                 "cpu, cuda (the first GPU; an error without one) or auto (cuda where a GPU answers, else cpu)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
}

Result<std::unique_ptr<Backend>> make_device_backend(const std::string& device, const CpuBackendOptions& cpu) {
  if (device == "cuda" || device == "auto") {
    Result<std::unique_ptr<Backend>> gpu = make_cuda_backend();
    if (gpu.ok()) return gpu;
    if (device == "cuda") return Status::error("--device cuda: " + gpu.message());
  }
  return make_cpu_backend(cpu);
}

}  // namespace th::cli
