#include "client/retry_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace th::client {
namespace {

using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;

TEST(RetryPolicy, RetryableStatuses) {
  for (int s : {429, 502, 503, 504}) EXPECT_TRUE(is_retryable_status(s)) << s;
  for (int s : {200, 400, 401, 403, 404, 408, 413, 500, 501, 505}) EXPECT_FALSE(is_retryable_status(s)) << s;
}

TEST(RetryPolicy, CeilingDoublesUpToTheCap) {
  EXPECT_EQ(backoff_ceiling(0, 100ms, 5000ms), 100ms);
  EXPECT_EQ(backoff_ceiling(1, 100ms, 5000ms), 200ms);
  EXPECT_EQ(backoff_ceiling(2, 100ms, 5000ms), 400ms);
  EXPECT_EQ(backoff_ceiling(5, 100ms, 5000ms), 3200ms);
  EXPECT_EQ(backoff_ceiling(6, 100ms, 5000ms), 5000ms);
  EXPECT_EQ(backoff_ceiling(1000000, 100ms, 5000ms), 5000ms);  // no overflow
  EXPECT_EQ(backoff_ceiling(3, 0ms, 5000ms), 0ms);
  EXPECT_EQ(backoff_ceiling(0, 300ms, 200ms), 200ms);
}

TEST(RetryPolicy, FullJitterIsUniformBelowTheCeiling) {
  Backoff backoff(100ms, 1000ms, 42);
  for (int retry = 0; retry < 6; ++retry) {
    const int64_t ceiling = backoff_ceiling(retry, 100ms, 1000ms).count();
    std::vector<int64_t> d;
    for (int i = 0; i < 4000; ++i) d.push_back(backoff.delay(retry).count());
    EXPECT_GE(*std::min_element(d.begin(), d.end()), 0);
    EXPECT_LE(*std::max_element(d.begin(), d.end()), ceiling);
    double mean = 0;
    for (int64_t x : d) mean += static_cast<double>(x);
    mean /= static_cast<double>(d.size());
    // uniform(0, c): mean c/2, standard error c/sqrt(12 n) ~ c/219; 5 of them.
    EXPECT_NEAR(mean, ceiling / 2.0, ceiling * 5.0 / 219.0) << "retry " << retry;
    // Both halves are used: jitter, not a fixed delay.
    EXPECT_LT(*std::min_element(d.begin(), d.end()), ceiling / 10 + 1);
    EXPECT_GT(*std::max_element(d.begin(), d.end()), ceiling * 9 / 10);
  }
}

TEST(RetryPolicy, SameSeedSameDelays) {
  Backoff a(50ms, 2000ms, 7), b(50ms, 2000ms, 7), c(50ms, 2000ms, 8);
  std::vector<int64_t> da, db, dc;
  for (int i = 0; i < 20; ++i) {
    da.push_back(a.delay(i % 6).count());
    db.push_back(b.delay(i % 6).count());
    dc.push_back(c.delay(i % 6).count());
  }
  EXPECT_EQ(da, db);
  EXPECT_NE(da, dc);
}

TEST(RetryPolicy, RetryAfterSecondsAndDates) {
  const auto now = std::chrono::system_clock::from_time_t(784111777);  // Sun, 06 Nov 1994 08:49:37 GMT
  EXPECT_EQ(parse_retry_after("1", now), ms(1000));
  EXPECT_EQ(parse_retry_after(" 120 ", now), ms(120000));
  EXPECT_EQ(parse_retry_after("0", now), ms(0));
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:40 GMT", now), ms(3000));
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now), ms(0));
  EXPECT_EQ(parse_retry_after("Sat, 05 Nov 1994 08:49:37 GMT", now), ms(0));  // past: now
  EXPECT_EQ(parse_retry_after("Mon, 07 Nov 1994 08:49:37 GMT", now), ms(86400000));
  EXPECT_EQ(parse_retry_after("99999999999", now), ms(std::chrono::hours(24 * 7)));
  for (const char* bad : {"", "-1", "1.5", "soon", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Foo 1994 08:49:37 GMT",
                          "Sunday, 06-Nov-94 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT"})
    EXPECT_FALSE(parse_retry_after(bad, now).has_value()) << bad;
}

TEST(RetryBudget, StartsFullAndEmptiesByOneARetry) {
  const Clock::time_point t0{};
  RetryBudget budget({.ratio = 0.1, .min_per_second = 0, .capacity = 3}, t0);
  EXPECT_TRUE(budget.try_spend(t0));
  EXPECT_TRUE(budget.try_spend(t0));
  EXPECT_TRUE(budget.try_spend(t0));
  EXPECT_FALSE(budget.try_spend(t0));
  EXPECT_NEAR(budget.tokens(t0), 0.0, 1e-9);
}

TEST(RetryBudget, RequestsEarnRetriesAtTheRatio) {
  const Clock::time_point t0{};
  RetryBudget budget({.ratio = 0.1, .min_per_second = 0, .capacity = 2}, t0);
  while (budget.try_spend(t0)) {
  }
  // 100 requests earn 10 retries, less the cap: the bucket holds 2.
  int retries = 0;
  for (int i = 0; i < 100; ++i) {
    budget.on_request(t0);
    if (budget.try_spend(t0)) ++retries;
  }
  EXPECT_EQ(retries, 10);
  for (int i = 0; i < 100; ++i) budget.on_request(t0);
  EXPECT_NEAR(budget.tokens(t0), 2.0, 1e-9);
}

TEST(RetryBudget, TimeRefillsTheFloor) {
  const Clock::time_point t0{};
  RetryBudget budget({.ratio = 0.1, .min_per_second = 2, .capacity = 5}, t0);
  while (budget.try_spend(t0)) {
  }
  EXPECT_FALSE(budget.try_spend(t0 + 400ms));  // 0.8 tokens
  EXPECT_TRUE(budget.try_spend(t0 + 500ms));   // 1.0
  EXPECT_FALSE(budget.try_spend(t0 + 500ms));
  EXPECT_NEAR(budget.tokens(t0 + 100s), 5.0, 1e-9);  // capped
  EXPECT_NEAR(budget.tokens(t0 + 50s), 5.0, 1e-9);   // time going backwards adds nothing
}

TEST(RetryBudget, SharedByThreads) {
  const Clock::time_point t0{};
  RetryBudget budget({.ratio = 0, .min_per_second = 0, .capacity = 100}, t0);
  std::atomic<int> spent{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i)
        if (budget.try_spend(t0)) ++spent;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(spent.load(), 100);
}

}  // namespace
}  // namespace th::client
