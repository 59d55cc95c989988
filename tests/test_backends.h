// The backends a model test runs on: the reference, the fast CPU backend at a thread count
// and ISA, or the CUDA backend (where there is no device, make() gives null and the test skips).
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cuda/cuda_backend.h"

namespace th::test {

struct BackendChoice {
  bool reference = false;
  int threads = 1;
  cpu::Isa isa = cpu::Isa::Generic;
  bool cuda = false;
  /// The backend, or null for cuda without a device.
  std::unique_ptr<Backend> make() const {
    if (cuda) {
      Result<std::unique_ptr<Backend>> b = make_cuda_backend();
      return b.ok() ? std::move(b).value() : nullptr;
    }
    if (reference) return make_reference_backend();
    CpuBackendOptions o;
    o.n_threads = threads;
    o.isa = isa;
    return make_cpu_backend(o);
  }
  /// "reference", "cpu_<isa>_t<threads>" or "cuda": a test name's suffix.
  std::string name() const {
    if (cuda) return "cuda";
    if (reference) return "reference";
    return "cpu_" + std::string(cpu::isa_name(isa)) + "_t" + std::to_string(threads);
  }
};

/// The reference, every ISA this CPU runs at each of `threads`, and cuda.
inline std::vector<BackendChoice> every_backend(std::initializer_list<int> threads) {
  std::vector<BackendChoice> v = {{true, 1, cpu::Isa::Generic}};
  for (cpu::Isa isa : cpu::available_isas())
    for (int t : threads) v.push_back({false, t, isa});
  v.push_back({false, 1, cpu::Isa::Generic, true});
  return v;
}

}  // namespace th::test
