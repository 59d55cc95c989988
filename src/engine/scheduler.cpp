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
        preempted_(st.seqs.size(), 0), owed_(st.seqs.size(), 0), stalled_(st.seqs.size(), 0),
        admitted_(st.seqs.size(), 0),
        avail_(st.available_blocks), host_avail_(st.host_free_blocks), budget_(st.token_budget), slots_(st.max_seqs) {}

  Decision run() {
    // Every running sequence holds a slot, every running decode has its token set aside, and
    // the blocks each needs to advance (generate its next token) are owed to it before any
    // queued sequence is admitted.
    for (size_t i = 0; i < st_.seqs.size(); ++i) {
      const SeqSummary& s = st_.seqs[i];
      if (s.phase != SeqPhase::Running) continue;
      --slots_;
      if (is_decode(s)) --budget_;
      owe(i, std::max<int64_t>(0, blocks_for(s.n_tokens, bs()) - s.blocks_held));
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
    if (d_.run.empty() && d_.preempt.empty()) unstall();
    return std::move(d_);
  }

 private:
  struct Snapshot {
    int64_t avail, host_avail, budget, slots, owed_total;
    size_t n_preempted;
  };
  Snapshot snapshot() const { return {avail_, host_avail_, budget_, slots_, owed_total_, d_.preempt.size()}; }
  void restore(const Snapshot& s) {
    avail_ = s.avail;
    host_avail_ = s.host_avail;
    budget_ = s.budget;
    slots_ = s.slots;
    owed_total_ = s.owed_total;
    while (d_.preempt.size() > s.n_preempted) {
      for (size_t i = 0; i < st_.seqs.size(); ++i) {
        if (st_.seqs[i].id != d_.preempt.back().id) continue;
        preempted_[i] = 0;
        owed_[i] = std::max<int64_t>(0, blocks_for(st_.seqs[i].n_tokens, bs()) - st_.seqs[i].blocks_held);
      }
      d_.preempt.pop_back();
    }
  }

  static int64_t remaining(const SeqSummary& s) { return s.n_tokens - s.n_computed; }
  static bool is_decode(const SeqSummary& s) { return s.phase == SeqPhase::Running && remaining(s) == 1; }
  int64_t bs() const { return st_.block_size; }

  // The worst-ranked running sequence ranked after `pos` that may be preempted, or npos. One
  // that came back from a preemption and has not advanced since is no victim: preempting it
  // again would throw away its recomputation for nothing (the ping-pong of issue #15).
  size_t victim_after(size_t pos) const {
    for (size_t k = order_.size(); k-- > pos + 1;) {
      const size_t i = order_[k];
      const SeqSummary& s = st_.seqs[i];
      if (!preempted_[i] && s.phase == SeqPhase::Running && !s.awaiting_advance) return i;
    }
    return kNone;
  }

  // Running sequences ranked above position `pos`, this step's admissions included.
  int64_t running_above(size_t pos) const {
    int64_t n = 0;
    for (size_t k = 0; k < pos; ++k) {
      const size_t j = order_[k];
      if (!preempted_[j] && (st_.seqs[j].phase == SeqPhase::Running || admitted_[j])) ++n;
    }
    return n;
  }

  // Blocks owed to running sequences: what they still need to advance and have not been given.
  void owe(size_t i, int64_t n) {
    owed_total_ += n - owed_[i];
    owed_[i] = n;
  }
  int64_t unowed() const { return avail_ - owed_total_; }

  // A sequence out of blocks with no victim left below it: it yields itself, unless it came back
  // from a preemption and has not advanced yet; then it keeps its blocks and waits a step, and
  // the victims it took (`before`) are spared: preempting them would gain it nothing.
  void give_way(size_t i, const Snapshot& before) {
    if (!st_.seqs[i].awaiting_advance) {
      preempt(i);
      return;
    }
    restore(before);
    stalled_[i] = 1;
  }

  // Nothing ran and nothing was preempted: every running sequence waits on blocks that only
  // protected sequences hold. The worst-ranked of them gives way after all, so the step makes
  // room and the better-ranked ones advance (liveness over the protection).
  void unstall() {
    for (size_t k = order_.size(); k-- > 0;) {
      if (stalled_[order_[k]]) {
        preempt(order_[k]);
        return;
      }
    }
  }

  void preempt(size_t i) {
    const SeqSummary& s = st_.seqs[i];
    preempted_[i] = 1;
    owe(i, 0);
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
    const Snapshot snap = snapshot();
    while (need > avail_) {
      const size_t v = victim_after(pos);
      if (v == kNone) break;
      preempt(v);
    }
    if (need > avail_) {
      give_way(i, snap);  // nothing left below it
      return;
    }
    avail_ -= need;
    owe(i, 0);
    d_.run.push_back({s.id, 1});
  }

  void prefill_running(size_t pos, size_t i) {
    const SeqSummary& s = st_.seqs[i];
    if (!may_prefill(s)) return;
    const int64_t want = std::min(remaining(s), prompt_budget(s));
    if (want < 1) return;  // the budget is spent: it keeps its blocks and goes on next step
    auto fit = [&] { return std::min(want, (s.blocks_held + avail_) * bs() - s.n_computed); };
    const Snapshot snap = snapshot();
    while (fit() < 1) {
      const size_t v = victim_after(pos);
      if (v == kNone) break;
      preempt(v);
    }
    if (fit() < 1) {
      give_way(i, snap);
      return;
    }
    const int64_t n = fit();
    const int64_t taken = blocks_for(s.n_computed + n, bs()) - s.blocks_held;
    avail_ -= taken;
    owe(i, std::max<int64_t>(0, owed_[i] - taken));
    budget_ -= n;
    d_.run.push_back({s.id, n});
    note_prefill(s, n);
  }

  // A queued sequence comes in only with the blocks nobody running is owed (the running set's
  // next token first), preempting worse-ranked running work if that makes it fit. A fresh prompt
  // may start with the chunk that fits (chunked prefill); one that was preempted comes back only
  // when every block it needs to advance fits, plus one block for each running sequence that
  // outranks it to grow into, else it would be the first victim again as soon as one of them
  // crosses into a new block
  // (issue #15: up to 7x more tokens computed than delivered, here; the headroom took 8 streams
  // of 200 tokens in 51 blocks from 1.46x to 1.28x).
  void admit(size_t pos, size_t i) {
    const SeqSummary& s = st_.seqs[i];
    const bool waiting = s.phase == SeqPhase::Waiting;
    const bool prompt = remaining(s) > 1;
    if (prompt && !may_prefill(s)) return;
    // Its next block is being computed by another: it waits for the cache (the queue goes on).
    const bool clustered = waiting && prompt && s.next_block != 0;
    if (clustered && (s.next_block_pending || std::find(shared_blocks_.begin(), shared_blocks_.end(), s.next_block) !=
                                                  shared_blocks_.end()))
      return;
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
    // `headroom`: a block per running sequence that outranks it (only those may preempt it);
    // worth waiting for, not worth preempting for.
    auto fit = [&](bool headroom = false) {
      const int64_t spare = headroom && s.awaiting_advance ? running_above(pos) : 0;
      if (s.awaiting_advance && cost(remaining(s)) + spare > unowed()) return int64_t{0};
      return std::min(want, (unowed() - base) * bs() - s.n_computed);
    };
    const Snapshot snap = snapshot();
    while (slots_ < 1 || fit() < 1) {
      const size_t v = victim_after(pos);
      if (v == kNone) break;
      preempt(v);
    }
    if (slots_ < 1 || fit(/*headroom=*/true) < 1) {
      restore(snap);  // preempting would not have been enough: preempt nothing for it
      queue_blocked_ = true;
      return;
    }
    const int64_t n = fit();
    avail_ -= cost(n);
    owe(i, cost(remaining(s)) - cost(n));  // the rest of its prompt is the running set's need now
    budget_ -= n;
    --slots_;
    admitted_[i] = 1;
    d_.run.push_back({s.id, n});
    if (prompt) note_prefill(s, n);
    if (clustered) shared_blocks_.push_back(s.next_block);  // it computes (toward) that block this step
  }

  static constexpr size_t kNone = static_cast<size_t>(-1);
  const SchedulerState& st_;
  const std::vector<size_t> order_;
  const bool hold_lower_prefill_;
  int64_t low_prompt_left_;
  std::vector<uint8_t> preempted_;
  std::vector<int64_t> owed_;      // blocks each running sequence still needs to advance
  std::vector<uint8_t> stalled_;   // out of blocks, waiting instead of yielding (awaiting_advance)
  std::vector<uint8_t> admitted_;  // queued, and running from this step on
  std::vector<uint64_t> shared_blocks_;  // next_block of each sequence admitted this step
  int64_t owed_total_ = 0;
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
