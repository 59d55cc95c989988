#include "server/admission.h"

#include <gtest/gtest.h>

#include "server/rate_limiter.h"

namespace th::server {
namespace {

Call call_with(const ApiKey* key, size_t prompts, int32_t n, int64_t max_tokens) {
  Call c;
  c.key = key;
  c.tenant = key ? key->tenant : "";
  c.req.n = n;
  c.req.max_tokens = max_tokens;
  for (size_t i = 0; i < prompts; ++i) c.prompt_ids.push_back({1, 2, 3});
  return c;
}

TEST(ApiAdmission, ServerRoomCountsEveryChoice) {
  Admission a(/*max_pending=*/4, nullptr);
  Call c = call_with(nullptr, 2, 2, 8);  // 4 choices
  EXPECT_FALSE(a.admit(c, 0, ApiClock::now()));
  Call d = call_with(nullptr, 2, 2, 8);
  const std::optional<Refusal> no = a.admit(d, 1, ApiClock::now());
  ASSERT_TRUE(no);
  EXPECT_EQ(no->status, 429);
  EXPECT_EQ(no->reason, "queue_full");
  EXPECT_EQ(no->error.code, "queue_full");
}

TEST(ApiAdmission, TenantCapHoldsASlotUntilRelease) {
  ApiKey key;
  key.tenant = "acme";
  key.max_concurrency = 1;
  Admission a(100, nullptr);
  Call first = call_with(&key, 1, 1, 8);
  ASSERT_FALSE(a.admit(first, 0, ApiClock::now()));
  EXPECT_TRUE(first.holds_slot);
  EXPECT_EQ(a.in_flight("acme"), 1);
  Call second = call_with(&key, 1, 1, 8);
  const std::optional<Refusal> no = a.admit(second, 0, ApiClock::now());
  ASSERT_TRUE(no);
  EXPECT_EQ(no->reason, "rate_limited");
  EXPECT_EQ(no->error.code, "concurrency_limit_exceeded");
  EXPECT_FALSE(second.holds_slot);
  a.release(first, 10, ApiClock::now());
  a.release(first, 10, ApiClock::now());  // twice: no underflow
  EXPECT_EQ(a.in_flight("acme"), 0);
  EXPECT_FALSE(a.admit(second, 0, ApiClock::now()));
}

TEST(ApiAdmission, RateLimitChargesTheEstimateAndSettlesTheRealCount) {
  ApiKey key;
  key.tenant = "t";
  key.tokens_per_minute = 100;
  RateLimiter limiter;
  Admission a(100, &limiter);
  const ApiClock::time_point now = ApiClock::now();
  Call c = call_with(&key, 1, 1, 50);  // 3 prompt + 50 = 53
  EXPECT_EQ(Admission::token_estimate(c), 53);
  ASSERT_FALSE(a.admit(c, 0, now));
  EXPECT_EQ(c.token_estimate, 53);
  EXPECT_NEAR(limiter.tokens_available(key, now), 47, 0.5);
  a.release(c, 13, now);  // it used 13: 40 given back
  EXPECT_NEAR(limiter.tokens_available(key, now), 87, 0.5);
  EXPECT_EQ(Admission::token_estimate(call_with(&key, 2, 3, -1)), 6 + 2 * 3 * 256) << "unbounded: 256 a choice";
}

}  // namespace
}  // namespace th::server
