#include "base/work_ranges.h"

#include <algorithm>

namespace th {

namespace {

constexpr uint64_t pack(int64_t front, int64_t back) {
  return static_cast<uint64_t>(front) << 32 | static_cast<uint64_t>(back);
}
constexpr int64_t front_of(uint64_t r) { return static_cast<int64_t>(r >> 32); }
constexpr int64_t back_of(uint64_t r) { return static_cast<int64_t>(r & 0xFFFFFFFFu); }

}  // namespace

WorkRanges::WorkRanges(int n_workers) : n_(std::max(n_workers, 1)), slots_(std::make_unique<Slot[]>(n_)) {}

void WorkRanges::reset(int64_t n, int64_t grain, int64_t max_piece, int64_t min_steal) {
  grain_ = std::max<int64_t>(grain, 1);
  min_steal_ = std::max<int64_t>(min_steal, 0);
  max_piece_ = max_piece > 0 ? std::max(max_piece / grain_, int64_t{1}) * grain_ : 0;
  for (int w = 0; w < n_; ++w) {
    int64_t front, back;
    initial_range(n, grain_, n_, w, &front, &back);
    slots_[w].range.store(pack(front, back), std::memory_order_relaxed);
  }
}

void WorkRanges::initial_range(int64_t n, int64_t grain, int n_workers, int w, int64_t* begin, int64_t* end) {
  grain = std::max<int64_t>(grain, 1);
  n_workers = std::max(n_workers, 1);
  const int64_t units = (n + grain - 1) / grain;
  *begin = std::min(n, units * w / n_workers * grain);
  *end = std::min(n, units * (w + 1) / n_workers * grain);
}

// An owner's claim: a quarter of what is left (so that a thief arriving late still finds
// something to take), in whole grains, capped at max_piece.
int64_t WorkRanges::piece(int64_t remaining) const {
  int64_t p = (remaining / 4 + grain_ - 1) / grain_ * grain_;
  p = std::max(p, grain_);
  if (max_piece_ > 0) p = std::min(p, max_piece_);
  return std::min(p, remaining);
}

bool WorkRanges::next(int w, int64_t* begin, int64_t* end) {
  std::atomic<uint64_t>& own = slots_[w].range;
  for (;;) {
    uint64_t cur = own.load(std::memory_order_acquire);
    while (front_of(cur) < back_of(cur)) {
      const int64_t front = front_of(cur), take = piece(back_of(cur) - front);
      if (own.compare_exchange_weak(cur, pack(front + take, back_of(cur)), std::memory_order_acq_rel,
                                    std::memory_order_acquire)) {
        *begin = front;
        *end = front + take;
        return true;
      }
    }
    if (!steal(w)) return false;
  }
}

// Takes the back half (split on a grain boundary; all of it when under two grains) of the
// first other range with at least 2 min_steal items left, and makes it w's own.
bool WorkRanges::steal(int w) {
  for (int i = 1; i < n_; ++i) {
    std::atomic<uint64_t>& victim = slots_[(w + i) % n_].range;
    uint64_t cur = victim.load(std::memory_order_acquire);
    while (front_of(cur) < back_of(cur) && back_of(cur) - front_of(cur) >= 2 * min_steal_) {
      // Fronts stay on grain boundaries (the split too); a back may be n.
      const int64_t front = front_of(cur), back = back_of(cur), left = back - front;
      const int64_t split = left >= 2 * grain_ ? front + (left + 1) / 2 / grain_ * grain_ : front;
      if (victim.compare_exchange_weak(cur, pack(front, split), std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
        slots_[w].range.store(pack(split, back), std::memory_order_release);
        return true;
      }
    }
  }
  return false;
}

}  // namespace th
