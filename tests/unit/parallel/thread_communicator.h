// Ranks as threads of one process, for tests: N communicators over shared memory, each used
// by one thread, with MPI's semantics for the collectives tensor parallelism uses (every
// rank calls the same collectives in the same order). What lets a unit test run a sharded
// model against the whole one without mpirun.
#pragma once

#include <barrier>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "parallel/communicator.h"

namespace th::test {

class ThreadGroup {
 public:
  explicit ThreadGroup(int n) : n_(n), sync_(n), ptrs_(static_cast<size_t>(n)) {}
  int n_;
  std::barrier<> sync_;
  std::vector<const void*> ptrs_;
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<ThreadGroup> g, int rank) : g_(std::move(g)), rank_(rank) {}
  std::string_view name() const override { return "threads"; }
  int rank() const override { return rank_; }
  int size() const override { return g_->n_; }
  Status all_reduce_sum(float* data, size_t n) override {
    publish(data);
    // Rank order, as every rank sums: each gets the same bits.
    std::vector<float> sum(n, 0.0f);
    for (int r = 0; r < g_->n_; ++r) {
      const float* p = static_cast<const float*>(g_->ptrs_[static_cast<size_t>(r)]);
      for (size_t i = 0; i < n; ++i) sum[i] += p[i];
    }
    g_->sync_.arrive_and_wait();  // everyone has read every input
    std::memcpy(data, sum.data(), n * sizeof(float));
    return ok_status();
  }
  Status all_gather(const void* send, size_t bytes, void* recv) override {
    publish(send);
    for (int r = 0; r < g_->n_; ++r)
      std::memcpy(static_cast<char*>(recv) + static_cast<size_t>(r) * bytes, g_->ptrs_[static_cast<size_t>(r)], bytes);
    g_->sync_.arrive_and_wait();
    return ok_status();
  }
  Status broadcast(void* data, size_t bytes, int root, bool) override {
    publish(data);
    if (rank_ != root) std::memcpy(data, g_->ptrs_[static_cast<size_t>(root)], bytes);
    g_->sync_.arrive_and_wait();
    return ok_status();
  }
  Status barrier(std::chrono::milliseconds) override {
    g_->sync_.arrive_and_wait();
    return ok_status();
  }
  [[noreturn]] void abort(int code) override { std::abort(); }
  bool failed() const override { return false; }

 private:
  void publish(const void* p) {
    g_->ptrs_[static_cast<size_t>(rank_)] = p;
    g_->sync_.arrive_and_wait();
  }
  std::shared_ptr<ThreadGroup> g_;
  int rank_;
};

inline std::vector<std::unique_ptr<ThreadCommunicator>> thread_communicators(int n) {
  auto g = std::make_shared<ThreadGroup>(n);
  std::vector<std::unique_ptr<ThreadCommunicator>> v;
  for (int r = 0; r < n; ++r) v.push_back(std::make_unique<ThreadCommunicator>(g, r));
  return v;
}

}  // namespace th::test
