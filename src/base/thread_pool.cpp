#include "base/thread_pool.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <thread>
#include <vector>

#include "base/cpu_set.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace th {

namespace {

// PAUSE takes about 65 cycles on Zen 2/3 (140 on Skylake and later), and a
// sched_yield with nothing else runnable 0.3-1.2 us, so 2^11 polls are
// roughly 0.1-0.3 ms: far longer than the gap between two ops of a forward pass
// (a few microseconds), far shorter than a sampling step or an idle server,
// after which the thread sleeps instead.
constexpr int kSpinPolls = 1 << 11;

// A wait first only pauses, for kPurePolls polls (10-20 us: 18 ns a PAUSE on
// the Zen 5 VM, 40 on Sapphire Rapids), then also yields the CPU every 8th poll.
// The pure spin is for a machine with a core for every worker: there a
// sched_yield returns at once, but as a system call, which cost the Zen 5 VM of
// session 16 1.2 us, so a worker spent 90% of its polling inside it and saw its
// next job 0.6 us late on average (BENCHMARKS "Session 16": decode of the 110M
// q2_K model on 2 threads 1.10x as fast). The yields are for an oversubscribed
// machine, where a pure PAUSE spin holds the core that a preempted worker needs
// to finish its share: measured on 2 shared cores at load average 11, a run of 2
// threads took 300 us with pure spinning and 9-13 us with a yield every 4-16
// polls (20 us every 64). `run` tells the two apart every kCheckRuns runs by the
// process's involuntary context switches since the last count (a yield that let
// another thread run is one, one that returned at once is not): more than
// kCheckRuns / 8 and the next kCheckRuns runs' waits yield from the start. On the
// quiet VM a count saw 1-4, with a second 2-thread process on its 2 vCPUs 128 or
// more.
constexpr int kPurePolls = 1 << 9;
constexpr uint32_t kCheckRuns = 64;

inline void poll_pause(int i, int pure_polls) {
  if (i >= pure_polls && (i & 7) == 7) {
    sched_yield();
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

long involuntary_switches() {
  rusage u{};
  return getrusage(RUSAGE_SELF, &u) == 0 ? u.ru_nivcsw : 0;
}

void pin_thread(pthread_t thread, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  // Failure (a CPU taken away since we read the mask) leaves the thread unpinned:
  // slower, still correct.
  (void)pthread_setaffinity_np(thread, sizeof(set), &set);
}

// Each counter on its own cache line: workers poll `generation` while the last
// one to finish writes `pending`; sharing a line would bounce it on every poll.
constexpr size_t kLine = 64;

}  // namespace

struct ThreadPool::Impl {
  int n = 1;
  std::vector<std::thread> threads;

  // `generation` steps once per run. job and stop are written by run() (or the
  // destructor) before it bumps `generation`; read by the workers only after they see the
  // bump (release/acquire on `generation`), and not written again before every worker has
  // finished (acquire on `pending`). On generation's line, so that the one transfer of that
  // line to a worker brings the job too.
  alignas(kLine) std::atomic<uint32_t> generation{0};
  const std::function<void(int, int)>* job = nullptr;
  bool stop = false;
  alignas(kLine) std::atomic<int> sleepers{0};         // workers blocked (or about to block) on generation
  alignas(kLine) std::atomic<int> pending{0};          // workers still running this generation's job
  alignas(kLine) std::atomic<bool> caller_asleep{false};
  // kPurePolls, or 0 while other threads want these CPUs (poll_pause); the caller's
  // count of runs and of the process's involuntary switches at the last check.
  alignas(kLine) std::atomic<int> pure_polls{kPurePolls};
  uint32_t runs = 0;
  long switches = 0;
  // A posted job still running on the workers (the caller's view), and the flag that asks it
  // to stop.
  bool posted = false;
  alignas(kLine) std::atomic<bool> cancel{false};

  bool pinned = false;
  pthread_t owner{};
  cpu_set_t owner_mask{};

  // Returns the first generation different from `seen`. The sleepers count makes
  // the waker skip its system call when nobody sleeps; both sides use seq_cst so
  // that either the waker sees our increment or we see its new generation
  // (store-buffer ordering, as in Dekker's algorithm).
  uint32_t await_generation(uint32_t seen) {
    const int pure = pure_polls.load(std::memory_order_relaxed);
    for (int i = 0; i < kSpinPolls; ++i) {
      const uint32_t g = generation.load(std::memory_order_acquire);
      if (g != seen) return g;
      poll_pause(i, pure);
    }
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    uint32_t g;
    while ((g = generation.load(std::memory_order_seq_cst)) == seen) generation.wait(seen, std::memory_order_seq_cst);
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    return g;
  }

  void worker_main(int index) {
    uint32_t seen = 0;
    for (;;) {
      seen = await_generation(seen);
      if (stop) return;
      (*job)(index, n);
      // The last one out wakes the caller, if it went to sleep (the same Dekker pairing
      // as above, with caller_asleep).
      if (pending.fetch_sub(1, std::memory_order_seq_cst) == 1 && caller_asleep.load(std::memory_order_seq_cst))
        pending.notify_one();
    }
  }

  void start(const std::function<void(int, int)>& j) {
    job = &j;
    pending.store(n - 1, std::memory_order_relaxed);
    generation.fetch_add(1, std::memory_order_seq_cst);  // publishes job and pending
    if (sleepers.load(std::memory_order_seq_cst) > 0) generation.notify_all();
  }

  void finish_posted() {
    if (!posted) return;
    cancel.store(true, std::memory_order_relaxed);
    wait_for_workers();
    cancel.store(false, std::memory_order_relaxed);
    posted = false;
  }

  void wait_for_workers() {
    const int pure = pure_polls.load(std::memory_order_relaxed);
    for (int i = 0; i < kSpinPolls; ++i) {
      if (pending.load(std::memory_order_acquire) == 0) return;
      poll_pause(i, pure);
    }
    caller_asleep.store(true, std::memory_order_seq_cst);
    int p;
    while ((p = pending.load(std::memory_order_seq_cst)) != 0) pending.wait(p, std::memory_order_seq_cst);
    caller_asleep.store(false, std::memory_order_relaxed);
  }
};

ThreadPool::ThreadPool(int n_threads, bool pin) : impl_(std::make_unique<Impl>()) {
  if (n_threads < 1) {
    std::fprintf(stderr, "tokenhive: ThreadPool needs at least one thread, got %d\n", n_threads);
    std::abort();
  }
  Impl& s = *impl_;
  s.n = n_threads;
  s.switches = involuntary_switches();
  const std::vector<int> cpus = pin ? allowed_cpus() : std::vector<int>{};
  s.threads.reserve(static_cast<size_t>(n_threads - 1));
  for (int i = 1; i < n_threads; ++i) {
    s.threads.emplace_back([&s, i] {
      pthread_setname_np(pthread_self(), "th-worker");
      s.worker_main(i);
    });
    if (pin) pin_thread(s.threads.back().native_handle(), cpus[static_cast<size_t>(i) % cpus.size()]);
  }
  if (pin) {
    // Pinned last: threads inherit their creator's mask, and the workers were made
    // while the caller still had the whole set.
    s.owner = pthread_self();
    if (pthread_getaffinity_np(s.owner, sizeof(s.owner_mask), &s.owner_mask) == 0) {
      s.pinned = true;
      pin_thread(s.owner, cpus[0]);
    }
  }
}

ThreadPool::~ThreadPool() {
  Impl& s = *impl_;
  s.finish_posted();
  s.stop = true;
  s.generation.fetch_add(1, std::memory_order_seq_cst);
  s.generation.notify_all();
  for (std::thread& t : s.threads) t.join();
  if (s.pinned && pthread_equal(s.owner, pthread_self()))
    (void)pthread_setaffinity_np(s.owner, sizeof(s.owner_mask), &s.owner_mask);
}

int ThreadPool::size() const { return impl_->n; }

void ThreadPool::run(const std::function<void(int, int)>& job) {
  Impl& s = *impl_;
  if (s.n == 1) {
    job(0, 1);
    return;
  }
  if (++s.runs % kCheckRuns == 0) {
    const long now = involuntary_switches();
    s.pure_polls.store(now - s.switches > static_cast<long>(kCheckRuns / 8) ? 0 : kPurePolls, std::memory_order_relaxed);
    s.switches = now;
  }
  s.finish_posted();
  s.start(job);
  job(0, s.n);
  s.wait_for_workers();
}

void ThreadPool::post(const std::function<void(int, int)>& job) {
  Impl& s = *impl_;
  if (s.n == 1) return;
  s.finish_posted();
  s.start(job);
  s.posted = true;
}

bool ThreadPool::cancelled() const { return impl_->cancel.load(std::memory_order_relaxed); }

void ThreadPool::join_posted() { impl_->finish_posted(); }

}  // namespace th
