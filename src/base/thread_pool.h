// A pool of worker threads created once, optionally pinned one per core, with
// a cheap barrier: `run` wakes every worker, runs the job on all of them (the
// caller takes part as worker 0) and returns when all are done. Made for the
// forward pass's many short parallel ops: no thread creation and no
// allocation per op.
//
// Waiting is spin-then-block: a worker that finds no new job polls for about
// 0.1-0.3 ms (pausing, and after the first 10-20 us, or at once when other threads
// have been taking these CPUs, yielding the CPU every few polls so that a
// preempted worker on an oversubscribed machine can finish), then sleeps on a futex
// (std::atomic::wait). Ops of one forward pass follow each other within
// microseconds, so back-to-back runs cost no system call; an idle pool between
// requests burns no CPU. `run` issues a wake-up system call only when some
// worker is actually asleep.
#pragma once

#include <functional>
#include <memory>

namespace th {

class ThreadPool {
 public:
  /// @brief n_threads >= 1 workers in all (the caller plus n_threads - 1 threads).
  /// With `pin`, worker i is bound to the i-th CPU (round-robin) of the constructing
  /// thread's affinity mask, and the constructing thread itself, which runs worker 0,
  /// to the first; the destructor gives that thread its mask back.
  explicit ThreadPool(int n_threads, bool pin = false);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const;
  /// @brief Runs job(thread_index, n_threads) on every worker and waits for all.
  /// Everything the job wrote is visible to the caller when run returns. Call from
  /// one thread at a time (the constructing one when pinned); the job must not throw.
  void run(const std::function<void(int, int)>& job);
  /// @brief Starts job(thread_index, n_threads) on the workers only (indices 1 ..
  /// n_threads - 1) and returns at once: work for the time they would spend waiting while
  /// the caller runs something alone, such as bringing the next run's data into their
  /// caches. The next `run` or `post` first sets `cancelled()` and waits for the workers to
  /// return, so the job should poll it; the job must stay alive until then. Nothing with
  /// one thread.
  void post(const std::function<void(int, int)>& job);
  /// @brief Whether the posted job should stop: another run or post is waiting for it.
  bool cancelled() const;
  /// @brief Stops the posted job, if any (cancelled() turns true), and waits for the workers
  /// to return from it: then what it reads may change.
  void join_posted();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace th
