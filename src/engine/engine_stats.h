// What the engine tells the API layer about itself: a snapshot taken after
// every step, safe to read from any thread.
#pragma once

#include <cstdint>

#include "kv/kv_cache_manager.h"

namespace th {

struct EngineStats {
  int64_t running = 0;   // prefilling or decoding
  int64_t waiting = 0;   // queued, never run or preempted for recompute
  int64_t swapped = 0;   // preempted with their KV in the host tier
  KvCacheStats kv;       // blocks used/free per tier, prefix cache hits
  double prefix_hit_rate() const {
    return kv.prefix_query_tokens ? static_cast<double>(kv.prefix_hit_tokens) / static_cast<double>(kv.prefix_query_tokens) : 0.0;
  }
  int64_t steps = 0;
  int64_t tokens_computed = 0;    // rows of every forward pass (prompt chunks and decodes)
  int64_t tokens_generated = 0;
  int64_t preempted_swap = 0, preempted_recompute = 0;
  int64_t submitted = 0, rejected = 0, finished = 0, cancelled = 0;  // finished counts every end, cancelled included
};

}  // namespace th
