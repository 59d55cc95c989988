#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace th {

namespace {

int64_t blocks_for(int64_t positions, int64_t bs) { return (positions + bs - 1) / bs; }

// The packing every policy shares; `order` ranks state.seqs best first.
class StepPacker {
 public:
  StepPacker(const SchedulerState& st, std::vector<size_t> order, bool hold_lower_prefill, int64_t low_prompt_cap)
      : st_(st), order_(std::move(order)), hold_lower_prefill_(hold_lower_prefill),
        low_prompt_left_(low_prompt_cap > 0 ? low_prompt_cap : std::numeric_limits<int64_t>::max()),
        preempted_(st.seqs.size(), 0), avail_(st.available_blocks), host_avail_(st.host_free_blocks),
        budget_(st.token_budget), slots_(st.max_seqs) {}

  Decision run() {
    // Every running sequence holds a slot, and every running decode has its token set aside.
    for (const SeqSummary& s : st_.seqs) {
      if (s.phase != SeqPhase::Running) continue;
      --slots_;
      if (is_decode(s)) --budget_;
    }
    for (size_t pos = 0; pos < order_.size(); ++pos) {
      const size_t i = order_[pos];
      if (preempted_[i]) continue;
      const SeqSummary& s = st_.seqs[i];
      if (remaining(s) < 1) continue;
      if (s.phase == SeqPhase::Running) {
        if (is_decode(s)) decode(pos, i);
        else prefill_running(pos, i);
      } else if (!queue_blocked_) {
        admit(pos, i);
      }
    }
    return std::move(d_);
  }

 private:
  static int64_t remaining(const SeqSummary& s) { return s.n_tokens - s.n_computed; }
  static bool is_decode(const SeqSummary& s) { return s.phase == SeqPhase::Running && remaining(s) == 1; }
  int64_t bs() const { return st_.block_size; }

  // The worst-ranked running sequence ranked after `pos`, or npos.
  size_t victim_after(size_t pos) const {
    for (size_t k = order_.size(); k-- > pos + 1;) {
      const size_t i = order_[k];
      if (!preempted_[i] && st_.seqs[i].phase == SeqPhase::Running) return i;
    }
    return kNone;
  }

  void preempt(size_t i) {
    const SeqSummary& s = st_.seqs[i];
    preempted_[i] = 1;
    avail_ += s.blocks_released;
    ++slots_;
    if (is_decode(s)) ++budget_;
    PreemptMode mode = PreemptMode::Recompute;
    if (s.n_computed > 0 && s.blocks_held <= host_avail_) {
      mode = PreemptMode::Swap;
      host_avail_ -= s.blocks_held;
    }
    d_.preempt.push_back({s.id, mode});
  }

  bool may_prefill(const SeqSummary& s) const { return !hold_lower_prefill_ || s.priority <= best_prefill_priority_; }
  // The prompt tokens this step may still give `s` (low priority: what its cap leaves).
  int64_t prompt_budget(const SeqSummary& s) const { return s.priority > 0 ? std::min(budget_, low_prompt_left_) : budget_; }
  void note_prefill(const SeqSummary& s, int64_t n) {
    best_prefill_priority_ = std::min(best_prefill_priority_, s.priority);
    if (s.priority > 0) low_prompt_left_ -= n;
  }

  void decode(size_t pos, size_t i) {
    const SeqSummary& s = st_.seqs[i];
    const int64_t need = blocks_for(s.n_computed + 1, bs()) - s.blocks_held;
    while (need > avail_) {
      const size_t v = victim_after(pos);
      if (v == kNone) break;
      preempt(v);
    }
    if (need > avail_) {
      preempt(i);  // nothing ranks below it: it gives way itself
      return;
    }
    avail_ -= need;
    d_.run.push_back({s.id, 1});
  }

  void prefill_running(size_t pos, size_t i) {
    const SeqSummary& s = st_.seqs[i];
    if (!may_prefill(s)) return;
    const int64_t want = std::min(remaining(s), prompt_budget(s));
    if (want < 1) return;  // the budget is spent: it keeps its blocks and goes on next step
    auto fit = [&] { return std::min(want, (s.blocks_held + avail_) * bs() - s.n_computed); };
    while (fit() < 1) {
      const size_t v = victim_after(pos);
      if (v == kNone) break;
      preempt(v);
    }
    if (fit() < 1) {
      preempt(i);
      return;
    }
    const int64_t n = fit();
    avail_ -= blocks_for(s.n_computed + n, bs()) - s.blocks_held;
    budget_ -= n;
    d_.run.push_back({s.id, n});
    note_prefill(s, n);
  }

  void admit(size_t pos, size_t i) {
    const SeqSummary& s = st_.seqs[i];
    const bool waiting = s.phase == SeqPhase::Waiting;
    const bool prompt = remaining(s) > 1;
    if (prompt && !may_prefill(s)) return;
    const int64_t want = std::min(remaining(s), prompt ? prompt_budget(s) : budget_);
    if (want < 1 && budget_ > 0) return;  // only its priority's cap is spent: others may still come in
    if (want < 1) {
      queue_blocked_ = true;
      return;
    }
    // Blocks it takes for n tokens: a waiting one keeps its prefix hit (paying hit_cost for it)
    // and adds blocks past it; a swapped one comes back whole, into new blocks.
    const int64_t base = waiting ? s.hit_cost - s.blocks_held : 0;
    auto cost = [&](int64_t n) { return base + blocks_for(s.n_computed + n, bs()); };
    auto fit = [&] { return std::min(want, (avail_ - base) * bs() - s.n_computed); };
    const Snapshot snap = snapshot();
    while (slots_ < 1 || fit() < 1) {
      const size_t v = victim_after(pos);
      if (v == kNone) break;
      preempt(v);
    }
    if (slots_ < 1 || fit() < 1) {
      restore(snap);  // preempting would not have been enough: preempt nothing for it
      queue_blocked_ = true;
      return;
    }
    const int64_t n = fit();
    avail_ -= cost(n);
    budget_ -= n;
    --slots_;
    d_.run.push_back({s.id, n});
    if (prompt) note_prefill(s, n);
  }

  struct Snapshot {
    int64_t avail, host_avail, budget, slots;
    size_t n_preempted;
  };
  Snapshot snapshot() const { return {avail_, host_avail_, budget_, slots_, d_.preempt.size()}; }
  void restore(const Snapshot& s) {
    avail_ = s.avail;
    host_avail_ = s.host_avail;
    budget_ = s.budget;
    slots_ = s.slots;
    while (d_.preempt.size() > s.n_preempted) {
      for (size_t i = 0; i < st_.seqs.size(); ++i)
        if (st_.seqs[i].id == d_.preempt.back().id) preempted_[i] = 0;
      d_.preempt.pop_back();
    }
  }

  static constexpr size_t kNone = static_cast<size_t>(-1);
  const SchedulerState& st_;
  const std::vector<size_t> order_;
  const bool hold_lower_prefill_;
  int64_t low_prompt_left_;
  std::vector<uint8_t> preempted_;
  int64_t avail_, host_avail_, budget_, slots_;
  bool queue_blocked_ = false;
  int32_t best_prefill_priority_ = std::numeric_limits<int32_t>::max();
  Decision d_;
};

std::vector<size_t> identity(size_t n) {
  std::vector<size_t> v(n);
  std::iota(v.begin(), v.end(), size_t{0});
  return v;
}

}  // namespace

Decision PriorityScheduler::schedule(const SchedulerState& st) const {
  std::vector<size_t> order = identity(st.seqs.size());
  const bool ageing = std::isfinite(seconds_per_level_);
  auto key = [&](const SeqSummary& s) { return s.arrival + static_cast<double>(s.priority) * seconds_per_level_; };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const SeqSummary &x = st.seqs[a], &y = st.seqs[b];
    if (ageing) {
      const double kx = key(x), ky = key(y);
      if (kx != ky) return kx < ky;
    } else if (x.priority != y.priority) {
      return x.priority < y.priority;
    }
    return x.arrival_no < y.arrival_no;
  });
  return StepPacker(st, std::move(order), /*hold_lower_prefill=*/true, low_priority_prompt_tokens_).run();
}

Decision FcfsScheduler::schedule(const SchedulerState& st) const {
  std::vector<size_t> order = identity(st.seqs.size());
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return st.seqs[a].arrival_no < st.seqs[b].arrival_no; });
  return StepPacker(st, std::move(order), /*hold_lower_prefill=*/false, /*low_prompt_cap=*/0).run();
}

}  // namespace th
