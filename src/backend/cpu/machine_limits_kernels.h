// The loops the machine-limit probes time, one set per ISA (generic here and in
// machine_limits.cpp; the others in machine_limits_avx2.cpp and
// machine_limits_avx512.cpp, compiled with their ISA's flags). Internal to the
// probes (and bench/stream_bench.cpp, which times the read beside its own loops);
// machine_limits.h is the interface.
#pragma once

#include <cstddef>
#include <cstdint>

namespace th::cpu::probe {

/// @brief A peak-arithmetic loop: run(iters) does iters rounds of independent
/// dependency chains (enough of them to cover the unit's latency times its
/// throughput) and returns a value that depends on every chain, so no round
/// can be optimized away. One round is ops_per_iter operations.
struct PeakKernel {
  double (*run)(int64_t iters) = nullptr;
  double ops_per_iter = 0;
};

/// @brief Bandwidth loops over [0, n): the sum of x (read), and a = b + s * c (triad).
struct StreamKernels {
  double (*read_sum)(const float* x, size_t n) = nullptr;
  void (*triad)(float* a, const float* b, const float* c, float s, size_t n) = nullptr;
};

PeakKernel fp32_fma_generic();
PeakKernel int8_dot_generic();
StreamKernels stream_generic();

PeakKernel fp32_fma_avx2();
PeakKernel int8_dot_avx2();
StreamKernels stream_avx2();

PeakKernel fp32_fma_avx512();
PeakKernel int8_dot_avx512();

}  // namespace th::cpu::probe
