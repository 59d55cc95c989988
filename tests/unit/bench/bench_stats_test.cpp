#include "bench/bench_stats.h"

#include <gtest/gtest.h>

namespace th::bench {
namespace {

// A completed request: sent at `send`, first chunk `ttft` later, then `n_chunks - 1`
// more chunks `gap` apart; `tokens` output tokens.
RequestRecord done(double send, double ttft, double gap, int n_chunks, int64_t tokens, std::string prio = "normal") {
  RequestRecord r;
  r.ok = true;
  r.send_s = send;
  r.first_token_s = send + ttft;
  for (int i = 0; i < n_chunks; ++i) r.token_times_s.push_back(r.first_token_s + gap * i);
  r.end_s = r.token_times_s.back();
  r.output_tokens = tokens;
  r.prompt_tokens = 10;
  r.priority = std::move(prio);
  return r;
}

RequestRecord failed(std::string error, std::string prio = "normal") {
  RequestRecord r;
  r.error = std::move(error);
  r.priority = std::move(prio);
  return r;
}

TEST(Percentile, LinearInterpolationAsNumpy) {
  // numpy.percentile([1, 2, 3, 4], [50, 90, 99]) == [2.5, 3.7, 3.97]
  const std::vector<double> a = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(percentile(a, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile(a, 90), 3.7);
  EXPECT_DOUBLE_EQ(percentile(a, 99), 3.97);
  EXPECT_DOUBLE_EQ(percentile(a, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(a, 100), 4);
  // numpy.percentile([15, 20, 35, 40, 50], [40, 90]) == [29, 46]: rank 1.6 and 3.6
  const std::vector<double> b = {15, 20, 35, 40, 50};
  EXPECT_DOUBLE_EQ(percentile(b, 40), 29);
  EXPECT_DOUBLE_EQ(percentile(b, 90), 46);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
}

TEST(Percentile, SummarizeSortsFirst) {
  const Distribution d = summarize({4, 1, 3, 2});
  EXPECT_EQ(d.count, 4);
  EXPECT_DOUBLE_EQ(d.mean, 2.5);
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.max, 4);
  EXPECT_DOUBLE_EQ(d.p50, 2.5);
  EXPECT_DOUBLE_EQ(d.p90, 3.7);
  EXPECT_DOUBLE_EQ(d.p99, 3.97);
  EXPECT_EQ(summarize({}).count, 0);
}

TEST(BenchStats, RequestLatenciesByHand) {
  // Sent at 1 s, first chunk at 1.5 s, then 4 more every 0.5 s: end at 3.5 s, 5 tokens.
  const RequestLatencies l = request_latencies(done(1.0, 0.5, 0.5, 5, 5));
  EXPECT_DOUBLE_EQ(l.ttft_ms, 500);
  EXPECT_DOUBLE_EQ(l.e2e_ms, 2500);
  ASSERT_TRUE(l.tpot_ms);
  EXPECT_DOUBLE_EQ(*l.tpot_ms, 500);  // (2500 - 500) / (5 - 1)
  ASSERT_EQ(l.itl_ms.size(), 4u);
  for (double g : l.itl_ms) EXPECT_NEAR(g, 500, 1e-9);
  // 9 tokens in those 5 chunks (the server's usage): TPOT is per token, ITL per chunk.
  EXPECT_DOUBLE_EQ(*request_latencies(done(1.0, 0.5, 0.5, 5, 9)).tpot_ms, 250);
  EXPECT_FALSE(request_latencies(done(0, 0.2, 0, 1, 1)).tpot_ms);  // one token: no TPOT
}

TEST(BenchStats, GoodputParsesVllmsForm) {
  Result<GoodputTargets> t = parse_goodput({"ttft:200", "tpot:50"});
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(*t->ttft_ms, 200);
  EXPECT_EQ(*t->tpot_ms, 50);
  EXPECT_FALSE(t->e2e_ms);
  Result<GoodputTargets> one = parse_goodput({"ttft:100,e2el:2000.5"});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one->e2e_ms, 2000.5);
  EXPECT_FALSE(parse_goodput({}).value().any());
  for (const char* bad : {"ttft", "ttft:", "ttft:-1", "ttft:0", "ttft:abc", "itl:5", "ttft:1 ttft:2"})
    EXPECT_FALSE(parse_goodput({bad}).ok()) << bad;
}

TEST(BenchStats, GoodputCountsRequestsMeetingEveryTarget) {
  GoodputTargets t;
  t.ttft_ms = 300;
  t.tpot_ms = 60;
  std::vector<RequestRecord> rs = {
      done(0, 0.1, 0.05, 11, 11),  // TTFT 100, TPOT 50: good
      done(0, 0.4, 0.05, 11, 11),  // TTFT 400: bad
      done(0, 0.1, 0.10, 11, 11),  // TPOT 100: bad
      done(0, 0.2, 0.0, 1, 1),     // one token: no TPOT, passes it; TTFT 200: good
      failed("boom"),              // never good
  };
  const BenchStats s = compute_stats(rs, 2.0, t);
  ASSERT_TRUE(s.all.good_requests);
  EXPECT_EQ(*s.all.good_requests, 2);
  EXPECT_DOUBLE_EQ(*s.all.goodput_per_s, 1.0);  // 2 good / 2 s
  EXPECT_FALSE(compute_stats(rs, 2.0, {}).all.good_requests);
}

TEST(BenchStats, CountsThroughputAndClasses) {
  std::vector<RequestRecord> rs = {
      done(0.0, 0.1, 0.01, 10, 10, "high"), done(0.5, 0.2, 0.01, 20, 20, "normal"),
      done(1.0, 0.3, 0.01, 30, 30, "normal"), failed("timeout", "low"), failed("timeout", "normal"),
      failed("reset", "normal"),
  };
  const BenchStats s = compute_stats(rs, 4.0, {});
  EXPECT_EQ(s.all.requests, 6);
  EXPECT_EQ(s.all.completed, 3);
  EXPECT_EQ(s.all.failed, 3);
  EXPECT_EQ(s.all.output_tokens, 60);
  EXPECT_EQ(s.all.input_tokens, 30);
  EXPECT_DOUBLE_EQ(s.all.output_tokens_per_s, 15.0);
  EXPECT_DOUBLE_EQ(s.all.request_throughput, 0.75);
  EXPECT_DOUBLE_EQ(s.all.total_tokens_per_s, 22.5);
  EXPECT_DOUBLE_EQ(s.all.ttft_ms.mean, 200);
  EXPECT_EQ(s.all.itl_ms.count, 9 + 19 + 29);
  ASSERT_EQ(s.by_priority.size(), 3u);
  EXPECT_EQ(s.by_priority.at("high").completed, 1);
  EXPECT_DOUBLE_EQ(s.by_priority.at("high").output_tokens_per_s, 2.5);  // class tokens / the run's duration
  EXPECT_EQ(s.by_priority.at("normal").requests, 4);
  EXPECT_EQ(s.by_priority.at("normal").failed, 2);
  EXPECT_EQ(s.by_priority.at("low").completed, 0);
  EXPECT_EQ(s.by_priority.at("low").ttft_ms.count, 0);
  ASSERT_EQ(s.errors.size(), 2u);
  EXPECT_EQ(s.errors[0], std::make_pair(std::string("timeout"), int64_t{2}));
}

}  // namespace
}  // namespace th::bench
