// How much memory this process may still take: what `serve` sizes its KV cache from when
// --kv-cache-mib is not given.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace th {

/// @brief Bytes of memory available to this process now: the kernel's MemAvailable
/// (/proc/meminfo), or less when a cgroup v2 limit (memory.max minus memory.current of the
/// process's own cgroup) leaves less.
Result<int64_t> available_memory_bytes();

/// @brief MemAvailable from the text of /proc/meminfo (kB -> bytes); an error naming the
/// field when it is missing or malformed.
Result<int64_t> parse_mem_available(const std::string& meminfo);

}  // namespace th
