#include "base/thread_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <set>
#include <thread>
#include <vector>

#include "base/cpu_set.h"

namespace th {
namespace {

TEST(ThreadPool, EveryIndexRunsExactlyOncePerRun) {
  for (int n : {1, 2, 3, 5, 8}) {
    ThreadPool pool(n);
    EXPECT_EQ(pool.size(), n);
    for (int rep = 0; rep < 50; ++rep) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> bad_total{0};
      pool.run([&](int i, int total) {
        if (total != n) bad_total.fetch_add(1);
        hits[static_cast<size_t>(i)].fetch_add(1);
      });
      EXPECT_EQ(bad_total.load(), 0);
      for (int i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n " << n << " index " << i;
    }
  }
}

TEST(ThreadPool, ManyTinyRunsComplete) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  constexpr int kRuns = 100000;
  for (int r = 0; r < kRuns; ++r) pool.run([&](int i, int) { sum.fetch_add(i + 1, std::memory_order_relaxed); });
  EXPECT_EQ(sum.load(), int64_t{kRuns} * (1 + 2 + 3));
}

// Plain (non-atomic) writes by every worker must be visible to the caller after run
// returns, and the caller's plain writes before run visible to the workers.
TEST(ThreadPool, ResultsAreVisibleAfterRun) {
  ThreadPool pool(4);
  std::vector<int64_t> data(4096);
  for (int round = 1; round <= 2000; ++round) {
    const int64_t base = round;  // read by the workers, written by the caller
    pool.run([&](int i, int n) {
      for (size_t k = static_cast<size_t>(i); k < data.size(); k += static_cast<size_t>(n))
        data[k] = base * 10000 + static_cast<int64_t>(k);
    });
    for (size_t k = 0; k < data.size(); ++k) ASSERT_EQ(data[k], base * 10000 + static_cast<int64_t>(k));
  }
}

TEST(ThreadPool, WorkersSleepAndWakeBetweenSparseRuns) {
  ThreadPool pool(3);
  std::atomic<int> count{0};
  for (int r = 0; r < 5; ++r) {
    // Longer than the spin phase (about 0.1 ms): every worker is asleep on its futex.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    pool.run([&](int, int) { count.fetch_add(1); });
  }
  EXPECT_EQ(count.load(), 15);
}

TEST(ThreadPool, SingleThreadRunsOnTheCaller) {
  ThreadPool pool(1);
  const std::thread::id me = std::this_thread::get_id();
  bool on_caller = false;
  int calls = 0;
  pool.run([&](int i, int n) {
    ++calls;
    on_caller = std::this_thread::get_id() == me && i == 0 && n == 1;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(on_caller);
}

TEST(ThreadPool, DestroysCleanlyWhileIdle) {
  for (int n : {1, 2, 4}) {
    {
      ThreadPool fresh(n);  // never ran
    }
    ThreadPool pool(n);
    pool.run([](int, int) {});
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // workers asleep
  }
  ThreadPool spinning(3);
  spinning.run([](int, int) {});  // destroyed while its workers still spin
}

// A posted job runs on the workers alone while the caller goes on; the next run (or post, or
// join_posted, or the destructor) asks it to stop and waits for it, so a job that runs until
// cancelled() cannot hold a run up, and the caller's plain writes after the join are safe.
TEST(ThreadPool, PostedJobRunsOnWorkersUntilTheNextRun) {
  for (int n : {1, 2, 3}) {
    ThreadPool pool(n);
    const std::thread::id me = std::this_thread::get_id();
    for (int rep = 0; rep < 200; ++rep) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> on_caller{0}, stopped{0};
      const std::function<void(int, int)> job = [&](int i, int total) {
        if (std::this_thread::get_id() == me || total != n) on_caller.fetch_add(1);
        hits[static_cast<size_t>(i)].fetch_add(1);
        while (!pool.cancelled()) std::this_thread::yield();
        stopped.fetch_add(1);
      };
      pool.post(job);
      EXPECT_FALSE(pool.cancelled());
      std::atomic<int> ran{0};
      if (rep % 3 == 2) {
        pool.join_posted();
      } else {
        pool.run([&](int, int) { ran.fetch_add(1); });
        EXPECT_EQ(ran.load(), n);
      }
      EXPECT_FALSE(pool.cancelled());
      ASSERT_EQ(on_caller.load(), 0);
      ASSERT_EQ(hits[0].load(), 0);  // the caller's index never runs a posted job
      for (int i = 1; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n " << n << " index " << i;
      ASSERT_EQ(stopped.load(), n - 1);  // every worker was out of the job when run returned
    }
    const std::function<void(int, int)> last = [&](int, int) {
      while (!pool.cancelled()) std::this_thread::yield();
    };
    pool.post(last);  // the destructor stops it
  }
}

TEST(ThreadPool, PostedJobsFollowEachOther) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  const std::function<void(int, int)> job = [&](int i, int) { sum.fetch_add(i, std::memory_order_relaxed); };
  for (int r = 0; r < 10000; ++r) pool.post(job);  // each post joins the one before
  pool.join_posted();
  EXPECT_EQ(sum.load(), int64_t{10000} * (1 + 2));
}

std::vector<int> affinity_of_current_thread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

TEST(ThreadPool, PinnedWorkersRunOnOneCpuEachRoundRobin) {
  const std::vector<int> allowed = allowed_cpus();
  const int n = static_cast<int>(allowed.size()) + 1;  // one more than CPUs: the last wraps around
  {
    ThreadPool pool(n, /*pin=*/true);
    std::vector<std::vector<int>> seen(static_cast<size_t>(n));
    pool.run([&](int i, int) { seen[static_cast<size_t>(i)] = affinity_of_current_thread(); });
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(seen[static_cast<size_t>(i)].size(), 1u) << "worker " << i;
      EXPECT_EQ(seen[static_cast<size_t>(i)][0], allowed[static_cast<size_t>(i) % allowed.size()]) << "worker " << i;
    }
  }
  // The constructing thread has its whole mask back.
  EXPECT_EQ(affinity_of_current_thread(), allowed);
}

TEST(ThreadPool, UnpinnedWorkersKeepTheWholeMask) {
  const std::vector<int> allowed = allowed_cpus();
  ThreadPool pool(3);
  std::vector<std::vector<int>> seen(3);
  pool.run([&](int i, int) { seen[static_cast<size_t>(i)] = affinity_of_current_thread(); });
  for (const auto& s : seen) EXPECT_EQ(s, allowed);
}

TEST(CpuSet, PhysicalCoresAreBetweenOneAndTheCpuCount) {
  const int cores = allowed_physical_cores();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, static_cast<int>(allowed_cpus().size()));
}

}  // namespace
}  // namespace th
