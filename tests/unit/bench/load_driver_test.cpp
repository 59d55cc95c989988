#include "bench/load_driver.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "bench/bench_stats.h"

namespace th::bench {
namespace {

std::unique_ptr<Workload> workload(int64_t output_len = 16) {
  WorkloadOptions o;
  o.input_len = 8;
  o.output_len = output_len;
  o.range_ratio = 0.5;
  Result<PriorityMix> mix = parse_priority_mix("high=1,normal=2,low=1");
  o.priorities = *mix;
  return std::move(make_workload(o)).value();
}

// A fake server: streams max_tokens tokens a chunk every `gap_ms` after `ttft_ms`; request
// indexes equal to 3 mod 7 fail. Counts requests in flight.
struct FakeSender {
  int ttft_ms = 2, gap_ms = 0;
  std::atomic<int> in_flight{0}, max_in_flight{0}, calls{0};

  Sender fn() {
    return [this](const BenchRequest& q) {
      const int now = ++in_flight;
      for (int m = max_in_flight; now > m && !max_in_flight.compare_exchange_weak(m, now);) {
      }
      ++calls;
      RequestRecord r;
      r.send_s = monotonic_s();
      std::this_thread::sleep_for(std::chrono::milliseconds(ttft_ms));
      if (q.index % 7 == 3) {
        r.error = "HTTP 500";
        r.end_s = monotonic_s();
        --in_flight;
        return r;
      }
      for (int64_t t = 0; t < q.max_tokens; ++t) {
        if (t) std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
        r.token_times_s.push_back(monotonic_s());
      }
      r.first_token_s = r.token_times_s.front();
      r.end_s = monotonic_s();
      r.output_tokens = q.max_tokens;
      r.ok = true;
      --in_flight;
      return r;
    };
  }
};

TEST(LoadDriver, EndToEndCountsAreConsistent) {
  auto w = workload();
  FakeSender fake;
  LoadOptions o;
  o.num_prompts = 60;
  o.max_concurrency = 8;
  std::mutex mu;
  std::vector<LoadProgress> progress;
  o.progress_interval_s = 0.01;
  o.on_progress = [&](const LoadProgress& p) {
    std::lock_guard lock(mu);
    progress.push_back(p);
  };
  const double before_unix =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  Result<LoadResult> res = run_load(*w, fake.fn(), o);
  ASSERT_TRUE(res.ok()) << res.message();
  ASSERT_EQ(res->records.size(), 60u);
  EXPECT_GE(res->start_unix_s, before_unix);  // the start on the system clock (--outputs' times)
  EXPECT_LE(res->start_unix_s, before_unix + res->duration_s + 1);
  EXPECT_EQ(fake.calls, 60);
  int64_t tokens = 0;
  for (size_t i = 0; i < res->records.size(); ++i) {
    const RequestRecord& r = res->records[i];
    EXPECT_EQ(r.index, static_cast<int64_t>(i));  // sorted by index
    EXPECT_EQ(r.priority, w->request(r.index).priority);
    EXPECT_EQ(r.prompt_tokens, w->request(r.index).input_tokens_hint);  // the hint, as the sender gave none
    EXPECT_GE(r.send_s, 0);  // rebased to the run's start
    EXPECT_LE(r.end_s, res->duration_s);
    if (r.ok) {
      EXPECT_GE(r.first_token_s, r.send_s);
      tokens += r.output_tokens;
    }
  }
  const BenchStats s = compute_stats(res->records, res->duration_s, {});
  EXPECT_EQ(s.all.completed + s.all.failed, s.all.requests);
  EXPECT_EQ(s.all.requests, 60);
  EXPECT_EQ(s.all.failed, 9);  // indexes 3, 10, ..., 59
  EXPECT_EQ(s.all.output_tokens, tokens);
  EXPECT_DOUBLE_EQ(s.all.output_tokens_per_s, static_cast<double>(tokens) / res->duration_s);
  int64_t by_class = 0;
  for (const auto& [name, c] : s.by_priority) by_class += c.requests;
  EXPECT_EQ(by_class, 60);
  ASSERT_FALSE(progress.empty());
  EXPECT_TRUE(progress.back().final);
  EXPECT_EQ(progress.back().done, 60);
  EXPECT_EQ(progress.back().failed, 9);
  EXPECT_EQ(progress.back().target, 60);
  EXPECT_EQ(progress.back().output_tokens, tokens);
}

TEST(LoadDriver, ConcurrencyCapHolds) {
  auto w = workload(4);
  FakeSender fake;
  fake.ttft_ms = 10;
  LoadOptions o;
  o.num_prompts = 40;
  o.max_concurrency = 5;
  Result<LoadResult> res = run_load(*w, fake.fn(), o);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(fake.max_in_flight, 5);  // reached (all 40 arrive at once) and never passed
  EXPECT_LE(res->max_in_flight, 5);
  // 40 requests of >= 10 ms, 5 at a time: at least 8 rounds.
  EXPECT_GE(res->duration_s, 0.08);
}

TEST(LoadDriver, WithoutACapEverythingIsInFlightAtOnce) {
  auto w = workload(2);
  FakeSender fake;
  fake.ttft_ms = 300;  // long enough for 30 threads to start even on a loaded machine
  LoadOptions o;
  o.num_prompts = 30;
  Result<LoadResult> res = run_load(*w, fake.fn(), o);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(fake.max_in_flight, 30);  // a thread per request in flight: nothing waits
  EXPECT_LT(res->duration_s, 2.0);
}

TEST(LoadDriver, RequestRateSpacesTheSends) {
  auto w = workload(1);
  FakeSender fake;
  LoadOptions o;
  o.num_prompts = 101;
  o.request_rate = 200;
  o.seed = 5;
  Result<LoadResult> res = run_load(*w, fake.fn(), o);
  ASSERT_TRUE(res.ok());
  // 100 gaps of mean 5 ms: 0.5 s, standard deviation 0.05 s (exponential gaps).
  const double last = res->records.back().send_s;
  EXPECT_GT(last, 0.3);
  EXPECT_LT(last, 0.8);
  EXPECT_LT(res->records.front().send_s, 0.05);  // the first goes at once
}

TEST(LoadDriver, DurationBoundsTheRun) {
  auto w = workload(1);
  FakeSender fake;
  LoadOptions o;
  o.num_prompts = 0;  // unbounded: the duration ends it
  o.duration_s = 0.3;
  o.request_rate = 100;
  Result<LoadResult> res = run_load(*w, fake.fn(), o);
  ASSERT_TRUE(res.ok());
  const size_t n = res->records.size();
  EXPECT_GT(n, 10u);  // ~30 expected
  EXPECT_LT(n, 60u);
  for (const RequestRecord& r : res->records) EXPECT_LT(r.send_s, 0.3 + 0.05);
  o.duration_s = 0;
  EXPECT_FALSE(run_load(*w, fake.fn(), o).ok());  // neither bound
}

TEST(LoadDriver, DurationAlsoEndsAWaitForASlot) {
  auto w = workload(1);
  FakeSender fake;
  fake.ttft_ms = 400;
  LoadOptions o;
  o.num_prompts = 10;
  o.max_concurrency = 1;
  o.duration_s = 0.1;
  Result<LoadResult> res = run_load(*w, fake.fn(), o);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->records.size(), 1u);  // the second never got a slot before the deadline
  EXPECT_LT(res->duration_s, 0.8);
}

TEST(LoadDriver, AThrowingSenderIsAFailedRequest) {
  auto w = workload(1);
  LoadOptions o;
  o.num_prompts = 3;
  Sender s = [](const BenchRequest& q) -> RequestRecord {
    if (q.index == 1) throw std::runtime_error("socket gone");
    RequestRecord r;
    r.ok = true;
    r.send_s = r.first_token_s = r.end_s = monotonic_s();
    r.token_times_s = {r.first_token_s};
    r.output_tokens = 1;
    return r;
  };
  Result<LoadResult> res = run_load(*w, s, o);
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE(res->records[0].ok);
  EXPECT_FALSE(res->records[1].ok);
  EXPECT_EQ(res->records[1].error, "sender threw: socket gone");
}

TEST(LoadDriver, ProgressLine) {
  LoadProgress p;
  p.target = 1000;
  p.done = 120;
  p.elapsed_s = 31.84;
  p.recent_requests_per_s = 3.9;
  p.recent_tokens_per_s = 498.24;
  p.in_flight = 16;
  EXPECT_EQ(format_progress(p), "[120/1000] 31.8 s  3.90 req/s  498.2 tok/s  in flight 16  failed 0");
  p.target = -1;
  EXPECT_EQ(format_progress(p).rfind("[120] ", 0), 0u);
}

}  // namespace
}  // namespace th::bench
