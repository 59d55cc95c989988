// What the engine tells the API layer about itself: a snapshot taken after
// every step, safe to read from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>

#include "kv/kv_cache_manager.h"

namespace th {

// SLO scheduling (slo_policy.h): the learned step cost, the last step's limits, and per
// priority class how many finished requests missed their targets.
struct SloClassCounts {
  int64_t finished = 0, ttft_missed = 0, tpot_missed = 0;
};
struct SloStats {
  std::array<double, 4> cost{};  // c0 s, s per decode, s per prompt token, s per KV position read
  int64_t cost_samples = 0;      // steps the fit has seen
  int64_t sized_steps = 0;       // steps whose limits the targets set
  int64_t token_budget = 0, max_seqs = 0;  // the last step's limits
  double predicted_step_seconds = 0, last_step_seconds = 0;
  int64_t window_holds = 0;  // --batch-window-ms: times admission waited, and for how long in all
  double window_seconds = 0;
  std::map<int32_t, SloClassCounts> classes;  // only classes with a target
};

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
  SloStats slo;
};

}  // namespace th
