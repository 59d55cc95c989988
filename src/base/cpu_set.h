// The CPUs this process may run on (its affinity mask), and how many physical
// cores they make: what the thread pool pins workers to, and the default
// thread count (llama.cpp's too: one thread per physical core, because two
// SMT siblings share one core's FMA units and load ports, and matrix kernels
// saturate them from one thread).
#pragma once

#include <vector>

namespace th {

/// @brief The CPU ids in the calling thread's affinity mask, ascending (at least one).
std::vector<int> allowed_cpus();

/// @brief Physical cores among allowed_cpus() (SMT siblings counted once, read from
/// /sys/devices/system/cpu/cpuN/topology); the CPU count where the topology is unreadable.
int allowed_physical_cores();

}  // namespace th
