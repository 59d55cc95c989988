#include "cluster/failure_detector.h"

#include <gtest/gtest.h>

namespace th::cluster {
namespace {

using namespace std::chrono_literals;

const Clock::time_point t0 = Clock::time_point{} + 1h;  // any fixed origin

TEST(FailureDetector, UnknownBeforeFirstHeartbeat) {
  FailureDetector d;
  EXPECT_EQ(d.health(), CellHealth::kUnknown);
  EXPECT_EQ(d.check(t0 + 10s), CellHealth::kUnknown);
  // A cell that never answered is not declared dead: there is nothing to lose.
  for (int i = 0; i < 5; ++i) d.on_failure(t0 + i * 50ms);
  EXPECT_EQ(d.check(t0 + 20s), CellHealth::kUnknown);
  EXPECT_EQ(d.consecutive_failures(), 5);
  EXPECT_EQ(d.deaths(), 0u);
  EXPECT_FALSE(d.detection_latency().has_value());
  EXPECT_FALSE(d.last_success().has_value());
  d.on_success(t0 + 21s);
  EXPECT_EQ(d.health(), CellHealth::kAlive);
  EXPECT_EQ(d.consecutive_failures(), 0);
  EXPECT_EQ(d.last_success(), t0 + 21s);
}

TEST(FailureDetector, AliveWhileHeartbeatsAnswer) {
  FailureDetector d;
  for (int i = 0; i < 200; ++i) {  // 10 s of heartbeats every 50 ms, checks in between
    d.on_success(t0 + i * 50ms);
    EXPECT_EQ(d.check(t0 + i * 50ms + 25ms), CellHealth::kAlive) << i;
    EXPECT_EQ(d.check(t0 + i * 50ms + 249ms), CellHealth::kAlive) << i;
  }
  EXPECT_EQ(d.deaths(), 0u);
  EXPECT_FALSE(d.detection_latency().has_value());
}

TEST(FailureDetector, SilenceIsDeathAtExactlyTheTimeout) {
  FailureDetector d;  // defaults: 250 ms
  d.on_success(t0);
  EXPECT_EQ(d.check(t0 + 249ms), CellHealth::kAlive);
  EXPECT_EQ(d.check(t0 + 250ms - 1ns), CellHealth::kAlive);
  EXPECT_EQ(d.check(t0 + 250ms), CellHealth::kDead);
  EXPECT_EQ(d.health(), CellHealth::kDead);
  EXPECT_EQ(d.deaths(), 1u);
  ASSERT_TRUE(d.detection_latency().has_value());
  EXPECT_EQ(*d.detection_latency(), 250ms);
}

TEST(FailureDetector, LatencyIsMeasuredFromTheLastSuccessToTheCheck) {
  FailureDetector d({.timeout = 1000ms, .failures_to_dead = 100});
  d.on_success(t0);
  d.on_success(t0 + 300ms);
  EXPECT_EQ(d.check(t0 + 1299ms), CellHealth::kAlive);
  EXPECT_EQ(d.check(t0 + 1377ms), CellHealth::kDead);  // a late check: detected 1077 ms after the last success
  EXPECT_EQ(*d.detection_latency(), 1077ms);
}

TEST(FailureDetector, RefusedTwiceIsDead) {
  FailureDetector d;
  d.on_success(t0);
  d.on_failure(t0 + 50ms);  // connection refused
  EXPECT_EQ(d.health(), CellHealth::kAlive);
  EXPECT_EQ(d.consecutive_failures(), 1);
  d.on_failure(t0 + 100ms);
  // Dead at the second failure itself, without waiting for a check.
  EXPECT_EQ(d.health(), CellHealth::kDead);
  EXPECT_EQ(d.deaths(), 1u);
  EXPECT_EQ(*d.detection_latency(), 100ms);
  EXPECT_EQ(d.check(t0 + 100ms), CellHealth::kDead);
}

TEST(FailureDetector, ASingleFailureBetweenSuccessesIsForgiven) {
  FailureDetector d;
  for (int i = 0; i < 100; ++i) {
    const auto t = t0 + i * 100ms;
    d.on_success(t);
    d.on_failure(t + 50ms);
    EXPECT_EQ(d.check(t + 60ms), CellHealth::kAlive) << i;
  }
  EXPECT_EQ(d.deaths(), 0u);
  EXPECT_EQ(d.consecutive_failures(), 1);
}

TEST(FailureDetector, AFailureAfterTheTimeoutIsDeathAtOnce) {
  FailureDetector d({.timeout = 250ms, .failures_to_dead = 5});
  d.on_success(t0);
  d.on_failure(t0 + 300ms);  // one failure, but the silence already passed the timeout
  EXPECT_EQ(d.health(), CellHealth::kDead);
  EXPECT_EQ(*d.detection_latency(), 300ms);
}

TEST(FailureDetector, RejoinsOnSuccessAndDiesAgain) {
  FailureDetector d;
  d.on_success(t0);
  d.on_failure(t0 + 50ms);
  d.on_failure(t0 + 100ms);
  ASSERT_EQ(d.health(), CellHealth::kDead);
  // Dead stays dead: more failures and checks change nothing.
  d.on_failure(t0 + 150ms);
  EXPECT_EQ(d.check(t0 + 10s), CellHealth::kDead);
  EXPECT_EQ(d.deaths(), 1u);
  EXPECT_EQ(*d.detection_latency(), 100ms);
  // One answer and it is back.
  d.on_success(t0 + 11s);
  EXPECT_EQ(d.health(), CellHealth::kAlive);
  EXPECT_EQ(d.consecutive_failures(), 0);
  EXPECT_EQ(d.check(t0 + 11s + 200ms), CellHealth::kAlive);
  EXPECT_EQ(d.check(t0 + 11s + 250ms), CellHealth::kDead);
  EXPECT_EQ(d.deaths(), 2u);
  EXPECT_EQ(*d.detection_latency(), 250ms);  // the latest death's
}

TEST(FailureDetector, OptionsAreHonoured) {
  FailureDetector one({.timeout = 1s, .failures_to_dead = 1});
  one.on_success(t0);
  one.on_failure(t0 + 10ms);
  EXPECT_EQ(one.health(), CellHealth::kDead);

  FailureDetector three({.timeout = 1s, .failures_to_dead = 3});
  three.on_success(t0);
  three.on_failure(t0 + 10ms);
  three.on_failure(t0 + 20ms);
  EXPECT_EQ(three.check(t0 + 999ms), CellHealth::kAlive);
  three.on_failure(t0 + 30ms);
  EXPECT_EQ(three.health(), CellHealth::kDead);
  EXPECT_EQ(*three.detection_latency(), 30ms);
}

TEST(FailureDetector, TimeBeforeTheLastSuccessCountsAsNoSilence) {
  FailureDetector d;
  d.on_success(t0 + 1s);
  d.on_success(t0 + 500ms);  // reported late: the later success stays
  EXPECT_EQ(d.last_success(), t0 + 1s);
  EXPECT_EQ(d.check(t0), CellHealth::kAlive);
  EXPECT_EQ(d.check(t0 + 1s + 249ms), CellHealth::kAlive);
  EXPECT_EQ(d.check(t0 + 1s + 250ms), CellHealth::kDead);
}

// The header's claim: with a 50 ms heartbeat and a check every heartbeat, a
// killed cell (refused at once) and a stopped cell (no answer at all) are
// both declared dead within 500 ms of the failure, whatever its phase.
TEST(FailureDetector, DefaultsDetectKilledAndStoppedCellsWithin500ms) {
  constexpr auto kInterval = 50ms;
  for (int phase_ms = 0; phase_ms < 50; phase_ms += 7) {
    const auto failure_at = t0 + 1s + std::chrono::milliseconds(phase_ms);
    for (bool killed : {true, false}) {
      FailureDetector d;
      std::optional<Clock::time_point> detected;
      for (auto t = t0; t < t0 + 5s && !detected; t += kInterval) {
        if (t < failure_at)
          d.on_success(t);
        else if (killed)
          d.on_failure(t);  // refused: fails at once
        // stopped: the heartbeat hangs; nothing is reported
        if (d.check(t) == CellHealth::kDead) detected = t;
      }
      ASSERT_TRUE(detected.has_value()) << phase_ms << (killed ? " killed" : " stopped");
      const auto after_failure = *detected - failure_at;
      EXPECT_LT(after_failure, 500ms) << phase_ms << (killed ? " killed" : " stopped");
      EXPECT_LE(after_failure, killed ? 100ms : 300ms) << phase_ms;
      EXPECT_GE(*d.detection_latency(), after_failure);  // an upper bound on failure -> detection
    }
  }
}

TEST(FailureDetector, HealthNames) {
  EXPECT_EQ(cell_health_name(CellHealth::kUnknown), "unknown");
  EXPECT_EQ(cell_health_name(CellHealth::kAlive), "alive");
  EXPECT_EQ(cell_health_name(CellHealth::kDead), "dead");
}

}  // namespace
}  // namespace th::cluster
