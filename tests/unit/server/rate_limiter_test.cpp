#include "server/rate_limiter.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace th::server {
namespace {

using Clock = RateLimiter::Clock;
using Limit = RateLimiter::Limit;
using std::chrono::milliseconds;
using std::chrono::seconds;

const Clock::time_point t0 = Clock::time_point() + std::chrono::hours(1000);

ApiKey key(double rpm, double tpm, const char* k = "sk-test-key-000000") {
  return ApiKey{k, "t", std::numeric_limits<int32_t>::min(), rpm, tpm};
}

TEST(RateLimiter, UnlimitedKeyIsAlwaysAdmitted) {
  RateLimiter rl;
  ApiKey k = key(0, 0);
  for (int i = 0; i < 1000; ++i) {
    RateLimiter::Decision d = rl.admit(k, 1'000'000, t0);
    ASSERT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining_requests, -1);
    EXPECT_EQ(d.remaining_tokens, -1);
  }
  rl.charge(k, 1'000'000'000, t0);
  EXPECT_TRUE(rl.admit(k, 1, t0).allowed);
  EXPECT_TRUE(std::isinf(rl.tokens_available(k, t0)));
}

TEST(RateLimiter, RequestBucketStartsFullAndRefillsContinuously) {
  RateLimiter rl;
  ApiKey k = key(60, 0);  // one request per second, burst 60
  for (int i = 0; i < 60; ++i) {
    RateLimiter::Decision d = rl.admit(k, 0, t0);
    ASSERT_TRUE(d.allowed) << i;
    EXPECT_EQ(d.remaining_requests, 59 - i);
    EXPECT_EQ(d.remaining_tokens, -1);
  }
  RateLimiter::Decision d = rl.admit(k, 0, t0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit, Limit::Requests);
  EXPECT_EQ(d.retry_after, seconds(1));
  d = rl.admit(k, 0, t0 + milliseconds(999));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, seconds(1));  // 1 ms to go still rounds up to 1 s
  EXPECT_TRUE(rl.admit(k, 0, t0 + seconds(1)).allowed);
  EXPECT_FALSE(rl.admit(k, 0, t0 + seconds(1)).allowed);
  // 30 s later: 30 more.
  EXPECT_NEAR(rl.requests_available(k, t0 + seconds(31)), 30.0, 1e-9);
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(rl.admit(k, 0, t0 + seconds(31)).allowed) << i;
  EXPECT_FALSE(rl.admit(k, 0, t0 + seconds(31)).allowed);
  // Never more than the burst, however long it waits.
  EXPECT_NEAR(rl.requests_available(k, t0 + std::chrono::hours(5)), 60.0, 1e-9);
}

TEST(RateLimiter, TokenRefillMathAndRetryAfter) {
  RateLimiter rl;
  ApiKey k = key(0, 600);  // 10 tokens per second
  EXPECT_TRUE(rl.admit(k, 600, t0).allowed);
  EXPECT_NEAR(rl.tokens_available(k, t0), 0.0, 1e-9);
  RateLimiter::Decision d = rl.admit(k, 100, t0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit, Limit::Tokens);
  EXPECT_EQ(d.retry_after, seconds(10));
  EXPECT_NEAR(rl.tokens_available(k, t0 + milliseconds(2500)), 25.0, 1e-9);
  d = rl.admit(k, 100, t0 + milliseconds(3500));  // 65 short: 6.5 s -> 7
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, seconds(7));
  d = rl.admit(k, 100, t0 + milliseconds(9500));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, seconds(1));
  d = rl.admit(k, 100, t0 + seconds(10));
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining_tokens, 0);
}

TEST(RateLimiter, DenialDebitsNothing) {
  RateLimiter rl;
  ApiKey k = key(10, 100);
  EXPECT_TRUE(rl.admit(k, 90, t0).allowed);
  RateLimiter::Decision d = rl.admit(k, 50, t0);  // tokens short; the request bucket must not pay
  EXPECT_FALSE(d.allowed);
  EXPECT_NEAR(rl.requests_available(k, t0), 9.0, 1e-9);
  EXPECT_NEAR(rl.tokens_available(k, t0), 10.0, 1e-9);
  EXPECT_TRUE(rl.admit(k, 10, t0).allowed);
}

TEST(RateLimiter, RetryAfterCoversTheLimitThatBindsLongest) {
  RateLimiter rl;
  ApiKey k = key(1, 60);  // 1 request/min, 1 token/s
  EXPECT_TRUE(rl.admit(k, 10, t0).allowed);
  RateLimiter::Decision d = rl.admit(k, 60, t0);  // requests: 60 s; tokens: 10 s
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit, Limit::Requests);
  EXPECT_EQ(d.retry_after, seconds(60));
  EXPECT_FALSE(rl.admit(k, 60, t0 + seconds(59)).allowed);
  EXPECT_TRUE(rl.admit(k, 60, t0 + seconds(60)).allowed);

  ApiKey k2 = key(600, 60, "sk-other-key-0000");
  EXPECT_TRUE(rl.admit(k2, 60, t0).allowed);
  d = rl.admit(k2, 30, t0);  // requests fine; tokens 30 s
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit, Limit::Tokens);
  EXPECT_EQ(d.retry_after, seconds(30));
  EXPECT_EQ(limit_name(Limit::Tokens), "tokens per minute");
  EXPECT_EQ(limit_name(Limit::Requests), "requests per minute");
}

TEST(RateLimiter, CostOverCapacityIsAdmittedOnAFullBucketAndLeavesADebt) {
  RateLimiter rl;
  ApiKey k = key(0, 1000);
  RateLimiter::Decision d = rl.admit(k, 5000, t0);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining_tokens, 0);
  EXPECT_NEAR(rl.tokens_available(k, t0), -4000.0, 1e-6);
  d = rl.admit(k, 1, t0);  // 4001 tokens short at 1000/min: 240.06 s
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, seconds(241));
  d = rl.admit(k, 5000, t0);  // needs the full bucket back: 5000 tokens, 300 s
  EXPECT_EQ(d.retry_after, seconds(300));
  EXPECT_FALSE(rl.admit(k, 5000, t0 + seconds(299)).allowed);
  EXPECT_TRUE(rl.admit(k, 5000, t0 + seconds(300)).allowed);

  // A fractional rate: rpm=0.5 holds half a request, and one is admitted on
  // the full bucket, then one per two minutes.
  ApiKey slow = key(0.5, 0, "sk-slow-key-00000");
  EXPECT_TRUE(rl.admit(slow, 0, t0).allowed);
  d = rl.admit(slow, 0, t0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, seconds(120));
  EXPECT_TRUE(rl.admit(slow, 0, t0 + seconds(120)).allowed);
}

TEST(RateLimiter, ChargeSettlesTheRealTokenCount) {
  RateLimiter rl;
  ApiKey k = key(0, 600);
  EXPECT_TRUE(rl.admit(k, 100, t0).allowed);  // 500 left
  rl.charge(k, 700, t0 + seconds(1));          // it used 800: 500 + 10 - 700
  EXPECT_NEAR(rl.tokens_available(k, t0 + seconds(1)), -190.0, 1e-9);
  RateLimiter::Decision d = rl.admit(k, 10, t0 + seconds(1));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, seconds(20));  // 200 tokens at 10/s
  EXPECT_TRUE(rl.admit(k, 10, t0 + seconds(21)).allowed);
  // A refund (it used fewer than estimated), capped at the capacity.
  rl.charge(k, -300, t0 + seconds(21));
  EXPECT_NEAR(rl.tokens_available(k, t0 + seconds(21)), 300.0, 1e-9);
  rl.charge(k, -100000, t0 + seconds(21));
  EXPECT_NEAR(rl.tokens_available(k, t0 + seconds(21)), 600.0, 1e-9);
  // Charging a key never seen starts from a full bucket.
  ApiKey fresh = key(0, 600, "sk-fresh-key-0000");
  rl.charge(fresh, 50, t0);
  EXPECT_NEAR(rl.tokens_available(fresh, t0), 550.0, 1e-9);
}

TEST(RateLimiter, NegativeEstimateCountsAsZeroAndClockGoingBackIsNoTime) {
  RateLimiter rl;
  ApiKey k = key(0, 60);
  EXPECT_TRUE(rl.admit(k, -100, t0).allowed);
  EXPECT_NEAR(rl.tokens_available(k, t0), 60.0, 1e-9);
  EXPECT_TRUE(rl.admit(k, 60, t0 + seconds(10)).allowed);
  EXPECT_FALSE(rl.admit(k, 1, t0).allowed);  // earlier than seen: no refill, no crash
  EXPECT_NEAR(rl.tokens_available(k, t0 + seconds(5)), 0.0, 1e-9);
  EXPECT_NEAR(rl.tokens_available(k, t0 + seconds(11)), 1.0, 1e-9);
}

TEST(RateLimiter, KeysHaveSeparateBuckets) {
  RateLimiter rl;
  ApiKey a = key(1, 0, "sk-key-a-00000000"), b = key(1, 0, "sk-key-b-00000000");
  EXPECT_TRUE(rl.admit(a, 0, t0).allowed);
  EXPECT_FALSE(rl.admit(a, 0, t0).allowed);
  EXPECT_TRUE(rl.admit(b, 0, t0).allowed);
  ApiKey a_again = a;  // the same key (say, a reloaded store) shares the bucket
  EXPECT_FALSE(rl.admit(a_again, 0, t0).allowed);
}

// Whenever a request is denied with retry_after r (and nothing else runs),
// it passes at now + r and would not have passed a second earlier.
TEST(RateLimiter, RetryAfterIsExactToTheSecondOnRandomTraffic) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    RateLimiter rl;
    double rpm = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? 0 : std::uniform_real_distribution<double>(0.3, 300)(rng);
    double tpm = std::uniform_real_distribution<double>(10, 20000)(rng);
    ApiKey k = key(rpm, tpm);
    Clock::time_point now = t0;
    for (int step = 0; step < 40; ++step) {
      now += milliseconds(std::uniform_int_distribution<int>(0, 5000)(rng));
      int64_t est = std::uniform_int_distribution<int64_t>(0, static_cast<int64_t>(tpm * 1.5))(rng);
      RateLimiter::Decision d = rl.admit(k, est, now);
      if (d.allowed) {
        if (step % 3 == 0) rl.charge(k, std::uniform_int_distribution<int64_t>(-est, est)(rng), now);
        continue;
      }
      ASSERT_GE(d.retry_after, seconds(1));
      // A denied admit debits nothing, and refilling is path-independent, so
      // probing a second early changes nothing.
      if (d.retry_after > seconds(1)) {
        ASSERT_FALSE(rl.admit(k, est, now + d.retry_after - seconds(1)).allowed) << "trial " << trial;
      }
      ASSERT_TRUE(rl.admit(k, est, now + d.retry_after).allowed)
          << "trial " << trial << " step " << step << " retry " << d.retry_after.count();
      now += d.retry_after;
    }
  }
}

TEST(RateLimiter, ConcurrentAdmitsNeverExceedTheBucket) {
  RateLimiter rl;
  ApiKey k = key(1000, 100000);
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 250; ++i) {
        if (rl.admit(k, 10, t0).allowed) {
          admitted.fetch_add(1);
          rl.charge(k, 5, t0);  // each used 15 tokens
        }
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 1000);  // the request bucket: exactly its burst
  EXPECT_NEAR(rl.tokens_available(k, t0), 100000.0 - 1000 * 15, 1e-6);
  EXPECT_NEAR(rl.requests_available(k, t0), 0.0, 1e-9);
}

}  // namespace
}  // namespace th::server
