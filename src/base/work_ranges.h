// Work sharing for a parallel loop over [0, n) whose items like to be visited in order
// (the rows of a weight matrix, streamed from memory): each worker owns one contiguous range,
// claims pieces from its front, and only when its own range is empty steals the back half of
// another worker's. A range is one 64-bit word (front, back) on its own cache line, so a
// worker that is not being robbed claims with a compare-and-swap on a line no other core
// touches.
//
// Why not one shared counter of chunks (CpuBackend::parallel_chunks): every claim moves the
// counter's line between cores (about 0.3 us each way on a 2-vCPU Zen 5 VM), and with a few
// chunks per thread the last chunk leaves one thread idle for up to a chunk's time: one token's
// q2_K decode lost about 10% of its matmul time to that imbalance (BENCHMARKS "Session 11").
// Here a worker's rows stay contiguous (its weight stream and prefetches run on across pieces),
// and the last pieces are small. A steal moves the victim's line to the thief and back on the
// victim's next claim, so a remainder too small to repay that (min_steal) stays with its owner.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace th {

class WorkRanges {
 public:
  /// @brief Ranges for n_workers workers (indices 0 .. n_workers - 1).
  explicit WorkRanges(int n_workers);

  /// @brief Splits [0, n) evenly (on multiples of grain) between the workers. Pieces are
  /// multiples of grain (but the last one) and at most max_piece items (<= 0: no cap). A
  /// thief takes half of another's range only when that half would be at least min_steal
  /// items; less is left to its owner, so with min_steal > 0 every worker must call next
  /// until it returns false (as every job of ThreadPool::run does). Call before the workers
  /// start (e.g. before ThreadPool::run, which publishes it); 0 <= n < 2^32.
  void reset(int64_t n, int64_t grain, int64_t max_piece = 0, int64_t min_steal = 0);

  /// @brief The range reset(n, grain, ...) gives worker w of n_workers, before any claim or
  /// steal: [*begin, *end), on grain boundaries (the last may end at n).
  static void initial_range(int64_t n, int64_t grain, int n_workers, int w, int64_t* begin, int64_t* end);

  /// @brief The next piece [*begin, *end) for worker w: from its own range, else stolen from
  /// another's. false when no range has anything left that w may take.
  bool next(int w, int64_t* begin, int64_t* end);

 private:
  struct alignas(64) Slot {
    std::atomic<uint64_t> range{0};  // front << 32 | back
  };
  bool steal(int w);
  int64_t piece(int64_t remaining) const;

  int n_;
  std::unique_ptr<Slot[]> slots_;
  int64_t grain_ = 1, max_piece_ = 0, min_steal_ = 0;
};

}  // namespace th
