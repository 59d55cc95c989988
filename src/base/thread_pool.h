// A pool of worker threads created once, optionally pinned one per core, with
// a cheap barrier: `run` wakes every worker, runs the job on all of them (the
// caller takes part as worker 0) and returns when all are done. Made for the
// forward pass's many short parallel ops: no thread creation and no
// allocation per op.
#pragma once

#include <functional>
#include <memory>

namespace th {

class ThreadPool {
 public:
  /// @brief n_threads >= 1 workers in all (the caller plus n_threads - 1 threads).
  explicit ThreadPool(int n_threads, bool pin = false);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const;
  /// @brief Runs job(thread_index, n_threads) on every worker and waits for all.
  void run(const std::function<void(int, int)>& job);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace th
