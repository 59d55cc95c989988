// The engine's SLO scheduling (slo_policy.h): each step's limits from the learned step cost,
// the per-class miss counts, and the batch window.
#include <algorithm>
#include <limits>
#include <numeric>

#include "engine/engine.h"

namespace th {

namespace {

double mean_gap(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

// The step's token budget and sequence cap from the TPOT targets of the live requests' classes.
// A pure rewrite of the scheduler's input: the policy (and its invariants) is the same.
void Engine::size_step_for_slo(SchedulerState& st) {
  const SloConfig& slo = config_.slo;
  counters_.slo.token_budget = st.token_budget;
  counters_.slo.max_seqs = st.max_seqs;
  if (!slo.tpot.any()) return;
  SloStepInput in;
  in.token_budget = st.token_budget;
  in.max_seqs = st.max_seqs;
  int64_t prompt_seqs = 0, prompt_pos = 0;
  for (const SeqSummary& x : st.seqs) {
    if (std::optional<double> t = slo.tpot.for_priority(x.priority)) in.tpot = std::min(in.tpot.value_or(*t), *t);
    const int64_t left = x.n_tokens - x.n_computed;
    if (x.phase == SeqPhase::Running) {
      ++in.running;
      if (left == 1) {
        ++in.decodes;
        in.decode_kv += x.n_computed + 1;
        continue;
      }
    }
    if (left > 1) {  // prompt tokens still to compute, on average at the middle of what is left
      ++prompt_seqs;
      prompt_pos += x.n_computed + left / 2;
    }
  }
  in.prompt_context = prompt_seqs > 0 ? prompt_pos / prompt_seqs : 0;
  const SloStepLimits lim = size_step(cost_, in);
  if (!lim.sized) return;
  st.token_budget = lim.token_budget;
  st.max_seqs = lim.max_seqs;
  ++counters_.slo.sized_steps;
  counters_.slo.token_budget = lim.token_budget;
  counters_.slo.max_seqs = lim.max_seqs;
  counters_.slo.predicted_step_seconds = lim.predicted_seconds;
}

// A completed request against its class's targets: TTFT, and TPOT as the mean gap between its
// tokens (bench serve's and vLLM's definition).
void Engine::count_slo(const Sequence& s) {
  const SloConfig& slo = config_.slo;
  const std::optional<double> ttft = slo.ttft.for_priority(s.request.priority);
  const std::optional<double> tpot = slo.tpot.for_priority(s.request.priority);
  if (!ttft && !tpot) return;
  SloClassCounts& c = counters_.slo.classes[s.request.priority];
  ++c.finished;
  if (ttft && s.metrics.ttft_seconds > *ttft) ++c.ttft_missed;
  if (tpot && !s.metrics.inter_token_seconds.empty() && mean_gap(s.metrics.inter_token_seconds) > *tpot)
    ++c.tpot_missed;
}

// --batch-window-ms: an idle engine (nothing running or swapped) may hold the prompts that just
// arrived so that prompts arriving soon after share their first forward pass. Adaptive: the
// window is the step's learned fixed cost c0 (what one merged pass saves the later arrival),
// within the cap, and only when arrivals come often enough that one is likely within it (the
// mean gap at most twice the window). It ends early once the queued prompts fill a step.
void Engine::hold_for_batch_window() {
  const double cap = config_.slo.batch_window_cap;
  if (cap <= 0) return;
  take_submissions();
  if (seqs_.empty()) return;
  Clock::time_point oldest = Clock::time_point::max();
  for (const auto& [id, s] : seqs_) {
    if (s->state != SeqState::Waiting) return;  // work in progress: its step goes now
    oldest = std::min(oldest, s->submitted);
  }
  const double window = std::min(cap, cost_.ready() ? cost_.coefficients()[0] : cap);
  if (window <= 0 || arrival_gap_ <= 0 || arrival_gap_ > 2 * window) return;
  const Clock::time_point start = Clock::now();
  const Clock::time_point until = oldest + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(window));
  while (!stop_requested_.load() && Clock::now() < until) {
    int64_t prompt = 0;
    for (const auto& [id, s] : seqs_) prompt += s->n_tokens();
    if (prompt >= config_.token_budget) break;
    signal_->wait_until(until, [&] { return stop_requested_.load() || queue_.size() > 0; });
    take_submissions();
  }
  ++counters_.slo.window_holds;
  counters_.slo.window_seconds += std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace th
