// Scheduler policies: which sequences take part in the next forward pass,
// with how many tokens each, and which running sequences give way. A policy is
// a pure function of a SchedulerState snapshot (counts only: no model, no KV
// cache), so it is unit-tested alone; the engine applies its Decision.
//
// The rules every policy here follows (see docs/ARCHITECTURE.md):
// - Sequences are taken in the policy's rank order. Running decodes (one token
//   each) are served first: their budget is set aside before any prompt chunk.
// - A step has a token budget and a cap on running sequences; prompts are
//   computed in chunks of what the budget leaves (chunked prefill).
// - When a sequence cannot get the blocks (or the slot) it needs, the
//   worst-ranked running sequence below it is preempted: swapped to the host
//   tier when its blocks fit there, else dropped to be recomputed from its
//   tokens. A running sequence with nothing below it yields itself.
// - Queued sequences (waiting or swapped) are admitted in rank order; the
//   first that cannot be admitted even after preempting everything below it
//   stops admission for this step, so a large request is not overtaken forever.
// - Admission uses only the blocks no running sequence is owed: each running
//   sequence's blocks to advance (its next token, or the rest of its prompt)
//   come first. A preempted sequence comes back only when all the blocks it
//   needs to advance fit, with a block to spare for each running sequence
//   that outranks it (those may preempt it);
//   until it has generated a token it is no victim and
//   does not yield itself (it waits), so no two sequences preempt each other
//   back and forth. If a step would then run nothing, the worst-ranked such
//   waiting sequence yields after all, so the step always makes room.
// - A waiting sequence whose next prompt block another sequence is computing (running, or
//   admitted in the same step) is skipped, not blocking the queue: next step that block is
//   in the prefix cache and it starts past it.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace th {

enum class SeqPhase : uint8_t { Running, Waiting, Swapped };

/// @brief What a policy knows of one live sequence.
struct SeqSummary {
  int64_t id = 0;
  SeqPhase phase = SeqPhase::Waiting;
  int32_t priority = 0;         // lower value = more important (vLLM's convention)
  double arrival = 0;           // seconds on the engine's clock
  uint64_t arrival_no = 0;      // submission order; breaks ties
  int64_t n_tokens = 0;         // tokens the sequence has: prompt, then generated
  int64_t n_computed = 0;       // Running, Swapped: positions with K/V; Waiting: positions its prefix-cache hit covers
  int64_t blocks_held = 0;      // Running: primary blocks; Swapped: host blocks; Waiting: blocks of its prefix hit
  int64_t blocks_released = 0;  // Running: primary blocks that preempting it frees or makes evictable
  int64_t hit_cost = 0;         // Waiting: available blocks taking its prefix hit uses up
  // Preempted, and has generated no token since: queued, it comes back only when every block it
  // needs to advance fits; running, it is no victim and does not yield itself.
  bool awaiting_advance = false;
  // Waiting, with a full prompt block past its prefix hit: that block's prefix-cache hash
  // (0: none), and whether a running sequence is computing that very block now. Such a
  // sequence waits for the block to reach the prefix cache instead of computing it too, and
  // so does one whose block another sequence admitted in the same step computes (prefix
  // clustering: a shared prompt is computed once, then hit).
  uint64_t next_block = 0;
  bool next_block_pending = false;
};

struct SchedulerState {
  int64_t block_size = 16;
  int64_t token_budget = 512;    // tokens per forward pass (>= max_seqs)
  int64_t max_seqs = 64;         // running sequences at most
  int64_t available_blocks = 0;  // primary blocks free or evictable
  int64_t host_free_blocks = 0;  // 0 without a host tier
  std::vector<SeqSummary> seqs;  // every live sequence, in any order
};

enum class PreemptMode : uint8_t { Swap, Recompute };

struct Decision {
  struct Preemption {
    int64_t id;
    PreemptMode mode;
  };
  struct Work {
    int64_t id;
    int64_t n_tokens;  // tokens to compute this step (a swapped sequence is swapped in first)
  };
  std::vector<Preemption> preempt;  // applied before the step's allocation
  std::vector<Work> run;            // in rank order
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual std::string_view name() const = 0;
  /// @brief The next step's plan; depends on nothing but `state`.
  [[nodiscard]] virtual Decision schedule(const SchedulerState& state) const = 0;
};

/// @brief Priority, then arrival. Ageing: waiting lowers a sequence's priority value by one
/// level per `seconds_per_level`, so ranks compare arrival + priority * seconds_per_level
/// (relative order never flips with time, so no two sequences preempt each other back and
/// forth, and every sequence eventually ranks above all later arrivals: none starves).
/// Infinity: strict priority. Prompt chunks of a priority level wait while a more important
/// level is computing its prompts in the step: on a CPU, whose step time grows with its
/// tokens, that keeps a high-priority request's time to first token near its unloaded value.
///
/// `low_priority_prompt_tokens` > 0 caps the prompt tokens per step of low-priority work
/// (priority > 0). A step cannot be interrupted, so a high-priority arrival first waits for the
/// step in flight; capping low-priority prompt chunks keeps that step short (the bench engine
/// priority scenario shows the effect), at the price of more, smaller steps for low prompts.
class PriorityScheduler final : public Scheduler {
 public:
  explicit PriorityScheduler(double seconds_per_level = 60.0, int64_t low_priority_prompt_tokens = 0)
      : seconds_per_level_(seconds_per_level), low_priority_prompt_tokens_(low_priority_prompt_tokens) {}
  std::string_view name() const override { return "priority"; }
  Decision schedule(const SchedulerState& state) const override;

 private:
  double seconds_per_level_;
  int64_t low_priority_prompt_tokens_;
};

/// @brief First come, first served (vLLM's default): priorities are ignored.
class FcfsScheduler final : public Scheduler {
 public:
  std::string_view name() const override { return "fcfs"; }
  Decision schedule(const SchedulerState& state) const override;
};

}  // namespace th
