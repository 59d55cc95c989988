// What this machine can do at most, measured: memory bandwidth (STREAM-style
// read and triad over arrays too large for any cache) and peak arithmetic
// (f32 FMA, int8 dot products) on T threads. `tokenhive bench model` divides
// a model's measured speed by the ceiling these imply, so a kernel's result
// reads as "x% of what the hardware allows" rather than a bare number.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "base/status.h"

namespace th::cpu {

/// @brief Best and median of a probe's repetitions (rates; best = highest).
struct ProbeRate {
  double best = 0;
  double median = 0;
  std::vector<double> samples;  // one per repetition, in run order
};

struct BandwidthOptions {
  size_t total_bytes = size_t{2} << 30;  // all arrays together; the default defeats any L3
  int n_threads = 1;
  int reps = 5;
};

/// @brief GB/s (1e9 bytes per second) of a read-only sum over every array and of a
/// triad a[i] = b[i] + s * c[i] (STREAM's count: 12 bytes per element, no write-allocate).
struct BandwidthResult {
  ProbeRate read_gb_per_s;
  ProbeRate triad_gb_per_s;
  size_t total_bytes = 0;
  int n_threads = 0;
};

/// @brief Measures bandwidth; fails on a size under 1 MiB, threads < 1, reps < 1, or no memory.
Result<BandwidthResult> measure_bandwidth(const BandwidthOptions& opt);

struct ComputeOptions {
  int n_threads = 1;
  int reps = 5;
  double seconds_per_rep = 0.1;  // each thread's busy time per repetition, roughly
  Isa isa = Isa::Generic;        // must be in available_isas()
};

/// @brief Giga-operations per second summed over all threads: for f32, 2 FLOPs per FMA lane;
/// for int8, 2 ops per 8-bit multiply-accumulate (AVX2: vpmaddubsw + vpmaddwd; AVX-512: vpdpbusd).
struct ComputeResult {
  ProbeRate gops;
  Isa isa = Isa::Generic;
  int n_threads = 0;
};

Result<ComputeResult> measure_fp32_fma_peak(const ComputeOptions& opt);
Result<ComputeResult> measure_int8_dot_peak(const ComputeOptions& opt);

}  // namespace th::cpu
