// Latency targets (serve --tpot-slo-ms / --ttft-slo-ms) and the step sizing that serves them:
// from the learned step cost (step_cost_model.h), how many prompt tokens the next step may
// take (its token budget) and how many sequences may run, so that the running streams' time
// per output token stays within the tightest target among the live requests' classes.
//
// The rules (docs/ARCHITECTURE.md, "SLO scheduling"):
// - No target, or a fit of fewer than StepCostModel::kWarmSteps steps: the static limits.
// - The step is planned to take at most kMargin x the target (step times vary; the target is
//   on a percentile).
// - Sequences: admission stops at the count whose decode-only step fits (never below the ones
//   running: nothing is preempted for the target; queued work simply waits, and the scheduler
//   admits it in rank order, so lower priorities give way first).
// - Prompt tokens: what is left of the step's time after the decodes, at least kSloMinChunk,
//   at most the static budget. No decode running:
//   nobody's TPOT is at stake and the static budget applies (TTFT is then best served whole).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "base/status.h"
#include "engine/step_cost_model.h"

namespace th {

/// @brief A target in seconds per priority class; `all` for classes not named.
struct SloClassTargets {
  std::optional<double> all;
  std::map<int32_t, double> by_priority;
  bool any() const { return all.has_value() || !by_priority.empty(); }
  std::optional<double> for_priority(int32_t p) const {
    if (auto it = by_priority.find(p); it != by_priority.end()) return it->second;
    return all;
  }
};

struct SloConfig {
  SloClassTargets tpot, ttft;   // seconds
  double batch_window_cap = 0;  // seconds; 0: admission never waits (--batch-window-ms)
  bool enabled() const { return tpot.any() || ttft.any(); }
};

/// @brief "50" (every class) or "high=40,normal=80,low=200" (milliseconds; priority names or
/// numbers), from the flag `flag` (named in the error).
Result<SloClassTargets> parse_slo_targets(const std::string& text, const std::string& flag);

/// @brief What the sizing needs of the live state (counts only, so it is unit-tested alone).
struct SloStepInput {
  int64_t running = 0;         // sequences running (prefilling or decoding)
  int64_t decodes = 0;         // of them, decoding: one token each next step
  int64_t decode_kv = 0;       // KV positions those decodes read
  int64_t prompt_context = 0;  // mean position of the prompt tokens waiting to be computed
  std::optional<double> tpot;  // the tightest TPOT target among live sequences (seconds)
  int64_t token_budget = 512;  // the static limits
  int64_t max_seqs = 64;
};

struct SloStepLimits {
  int64_t token_budget = 0, max_seqs = 0;
  double predicted_seconds = 0;  // of the decodes plus the budget's prompt tokens
  bool sized = false;            // false: the static limits (no target or no fit yet)
};

inline constexpr double kSloMargin = 0.85;
// One prompt token per step at least: a prompt already running always advances. More would
// break the target by design (on the 1.1B model a prompt token costs about a decode's 9 ms).
inline constexpr int64_t kSloMinChunk = 1;

SloStepLimits size_step(const StepCostModel& cost, const SloStepInput& in);

}  // namespace th
