#include "server/serving_metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "integration/run_process.h"

namespace th::server {
namespace {

std::map<std::string, double> samples(const std::string& page) {
  std::map<std::string, double> out;
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    out[line.substr(0, sp)] = std::strtod(line.c_str() + sp + 1, nullptr);
  }
  return out;
}

RequestMetrics finished(double queue, double ttft, std::vector<double> gaps, double e2e) {
  RequestMetrics m;
  m.queue_seconds = queue;
  m.ttft_seconds = ttft;
  m.inter_token_seconds = std::move(gaps);
  m.e2e_seconds = e2e;
  m.n_prompt = 10;
  m.n_generated = static_cast<int64_t>(m.inter_token_seconds.size()) + 1;
  m.prefix_hit_tokens = 8;
  return m;
}

TEST(ServingMetrics, RecordRequestFillsHistogramsAndCounters) {
  ServingMetrics sm;
  sm.record_request(finished(0.002, 0.03, {0.02, 0.04, 0.06}, 0.2), FinishReason::Stop);
  sm.record_request(finished(0.5, 1.5, {}, 1.5), FinishReason::Length);  // one token: no TPOT
  RequestMetrics never_ran;  // cancelled while queued: only the end-to-end time
  never_ran.e2e_seconds = 3;
  never_ran.n_prompt = 7;
  sm.record_request(never_ran, FinishReason::Cancelled);
  const auto m = samples(sm.render());

  EXPECT_EQ(m.at("tokenhive_time_to_first_token_seconds_count"), 2);
  EXPECT_DOUBLE_EQ(m.at("tokenhive_time_to_first_token_seconds_sum"), 1.53);
  EXPECT_EQ(m.at("tokenhive_time_to_first_token_seconds_bucket{le=\"0.04\"}"), 1);
  EXPECT_EQ(m.at("tokenhive_request_queue_time_seconds_count"), 2);
  EXPECT_EQ(m.at("tokenhive_e2e_request_latency_seconds_count"), 3);
  EXPECT_DOUBLE_EQ(m.at("tokenhive_e2e_request_latency_seconds_sum"), 4.7);
  // Every gap goes to the inter-token histogram; their mean, once per request, to TPOT.
  EXPECT_EQ(m.at("tokenhive_inter_token_latency_seconds_count"), 3);
  EXPECT_EQ(m.at("tokenhive_inter_token_latency_seconds_bucket{le=\"0.025\"}"), 1);
  EXPECT_EQ(m.at("tokenhive_inter_token_latency_seconds_bucket{le=\"0.05\"}"), 2);
  EXPECT_EQ(m.at("tokenhive_time_per_output_token_seconds_count"), 1);
  EXPECT_DOUBLE_EQ(m.at("tokenhive_time_per_output_token_seconds_sum"), 0.04);

  EXPECT_EQ(m.at("tokenhive_prompt_tokens_total"), 27);
  EXPECT_EQ(m.at("tokenhive_generation_tokens_total"), 5);
  EXPECT_EQ(m.at("tokenhive_prefix_cache_hit_tokens_total"), 16);
  EXPECT_EQ(m.at("tokenhive_requests_total{outcome=\"stop\"}"), 1);
  EXPECT_EQ(m.at("tokenhive_requests_total{outcome=\"length\"}"), 1);
  EXPECT_EQ(m.at("tokenhive_requests_total{outcome=\"cancelled\"}"), 1);
  EXPECT_EQ(m.at("tokenhive_requests_total{outcome=\"deadline\"}"), 0);  // every outcome renders from the start
  EXPECT_EQ(m.at("tokenhive_requests_total{outcome=\"error\"}"), 0);
}

TEST(ServingMetrics, RejectionsByReasonUnknownOnesAsOther) {
  ServingMetrics sm;
  sm.record_rejected("queue_full");
  sm.record_rejected("queue_full");
  sm.record_rejected("too_large");
  sm.record_rejected("something new");
  const auto m = samples(sm.render());
  EXPECT_EQ(m.at("tokenhive_requests_rejected_total{reason=\"queue_full\"}"), 2);
  EXPECT_EQ(m.at("tokenhive_requests_rejected_total{reason=\"too_large\"}"), 1);
  EXPECT_EQ(m.at("tokenhive_requests_rejected_total{reason=\"other\"}"), 1);
  EXPECT_EQ(m.at("tokenhive_requests_rejected_total{reason=\"unauthorized\"}"), 0);
  EXPECT_EQ(m.count("tokenhive_requests_rejected_total{reason=\"something new\"}"), 0u);
}

// The dashboard's requests by priority and per-tenant rates; the labels stay a bounded set.
TEST(ServingMetrics, CallsByTenantPriorityAndOutcome) {
  ServingMetrics sm;
  sm.record_call("alpha", -1, "stop", 5);
  sm.record_call("alpha", -1, "stop", 7);
  sm.record_call("beta", 0, "cancelled", 3);
  sm.record_call("", 42, "something new", 1);
  const auto m = samples(sm.render());
  EXPECT_EQ(m.at("tokenhive_calls_total{tenant=\"alpha\",priority=\"high\",outcome=\"stop\"}"), 2);
  EXPECT_EQ(m.at("tokenhive_calls_total{tenant=\"beta\",priority=\"normal\",outcome=\"cancelled\"}"), 1);
  EXPECT_EQ(m.at("tokenhive_calls_total{tenant=\"\",priority=\"other\",outcome=\"other\"}"), 1);
  EXPECT_EQ(m.at("tokenhive_tenant_tokens_total{tenant=\"alpha\"}"), 12);
  EXPECT_EQ(m.at("tokenhive_tenant_tokens_total{tenant=\"beta\"}"), 3);
}

EngineStats engine_snapshot() {
  EngineStats s;
  s.running = 3;
  s.waiting = 5;
  s.swapped = 1;
  s.kv.primary_blocks = 200;
  s.kv.primary_used = 50;
  s.kv.host_blocks = 400;
  s.kv.host_used = 100;
  s.kv.cached_blocks = 12;
  s.steps = 1000;
  s.tokens_computed = 12345;
  s.tokens_generated = 2469;
  s.preempted_swap = 4;
  s.preempted_recompute = 2;
  return s;
}

TEST(ServingMetrics, PrefixHitsByTierBlockMovesAndStall) {
  ServingMetrics sm;
  EngineStats s = engine_snapshot();
  s.kv.prefix_query_tokens = 1000;
  s.kv.prefix_hit_tokens = 600;
  s.kv.prefix_host_hit_tokens = 200;
  s.kv.host_cached_blocks = 7;
  s.kv.demoted_blocks = 9;
  s.kv.promoted_blocks = 4;
  s.kv.swapped_in_blocks = 30;
  s.kv.prefetched_blocks = 20;
  s.kv.prefetch_wasted_blocks = 3;
  s.kv.swap_in_stall_seconds = 0.25;
  sm.set_engine(s);
  auto m = samples(sm.render());
  EXPECT_EQ(m.at("tokenhive_kv_prefix_lookup_tokens_total"), 1000);
  EXPECT_EQ(m.at("tokenhive_kv_prefix_hit_tokens_total{tier=\"primary\"}"), 400);
  EXPECT_EQ(m.at("tokenhive_kv_prefix_hit_tokens_total{tier=\"host\"}"), 200);
  EXPECT_EQ(m.at("tokenhive_kv_prefix_hit_ratio{tier=\"primary\"}"), 0.4);
  EXPECT_EQ(m.at("tokenhive_kv_prefix_hit_ratio{tier=\"host\"}"), 0.2);
  EXPECT_EQ(m.at("tokenhive_kv_host_cached_blocks"), 7);
  EXPECT_EQ(m.at("tokenhive_kv_block_moves_total{kind=\"demoted\"}"), 9);
  EXPECT_EQ(m.at("tokenhive_kv_block_moves_total{kind=\"promoted\"}"), 4);
  EXPECT_EQ(m.at("tokenhive_kv_block_moves_total{kind=\"swapped_in\"}"), 30);
  EXPECT_EQ(m.at("tokenhive_kv_block_moves_total{kind=\"prefetched\"}"), 20);
  EXPECT_EQ(m.at("tokenhive_kv_block_moves_total{kind=\"prefetch_wasted\"}"), 3);
  EXPECT_EQ(m.at("tokenhive_kv_swap_in_stall_seconds_total"), 0.25);
}

TEST(ServingMetrics, EngineSnapshotAsGaugesAndCounters) {
  ServingMetrics sm;
  sm.set_engine(engine_snapshot());
  auto m = samples(sm.render());
  EXPECT_EQ(m.at("tokenhive_requests_running"), 3);
  EXPECT_EQ(m.at("tokenhive_requests_waiting"), 5);
  EXPECT_EQ(m.at("tokenhive_requests_swapped"), 1);
  EXPECT_EQ(m.at("tokenhive_kv_blocks_used{tier=\"primary\"}"), 50);
  EXPECT_EQ(m.at("tokenhive_kv_blocks_used{tier=\"host\"}"), 100);
  EXPECT_EQ(m.at("tokenhive_kv_blocks_capacity{tier=\"primary\"}"), 200);
  EXPECT_EQ(m.at("tokenhive_kv_blocks_capacity{tier=\"host\"}"), 400);
  EXPECT_EQ(m.at("tokenhive_kv_usage_ratio{tier=\"primary\"}"), 0.25);
  EXPECT_EQ(m.at("tokenhive_kv_usage_ratio{tier=\"host\"}"), 0.25);
  EXPECT_EQ(m.at("tokenhive_kv_cached_blocks"), 12);
  EXPECT_EQ(m.at("tokenhive_preemptions_total{kind=\"swap\"}"), 4);
  EXPECT_EQ(m.at("tokenhive_preemptions_total{kind=\"recompute\"}"), 2);
  EXPECT_EQ(m.at("tokenhive_engine_steps_total"), 1000);
  EXPECT_EQ(m.at("tokenhive_engine_tokens_computed_total"), 12345);
  EXPECT_EQ(m.at("tokenhive_engine_tokens_generated_total"), 2469);
  EXPECT_EQ(m.at("tokenhive_engine_tokens_computed_per_generated"), 5);

  // A later snapshot moves gauges either way; counters only forward.
  EngineStats later = engine_snapshot();
  later.running = 0;
  later.kv.primary_used = 0;
  later.kv.host_blocks = 0;  // no host tier: ratio 0, not NaN
  later.kv.host_used = 0;
  later.steps = 1001;
  later.preempted_swap = 1;
  later.tokens_generated = 0;  // (a restarted engine's snapshot) ratio 0, not infinity
  sm.set_engine(later);
  m = samples(sm.render());
  EXPECT_EQ(m.at("tokenhive_requests_running"), 0);
  EXPECT_EQ(m.at("tokenhive_kv_blocks_used{tier=\"primary\"}"), 0);
  EXPECT_EQ(m.at("tokenhive_kv_usage_ratio{tier=\"host\"}"), 0);
  EXPECT_EQ(m.at("tokenhive_engine_steps_total"), 1001);
  EXPECT_EQ(m.at("tokenhive_preemptions_total{kind=\"swap\"}"), 4);
  EXPECT_EQ(m.at("tokenhive_engine_tokens_generated_total"), 2469);
  EXPECT_EQ(m.at("tokenhive_engine_tokens_computed_per_generated"), 0);
}

TEST(ServingMetrics, HttpSnapshot) {
  ServingMetrics sm;
  http::HttpServerStats h;
  h.open_connections = 7;
  h.in_flight = 2;
  h.accepted = 100;
  h.rejected = 3;
  h.requests = 250;
  h.bad_requests = 4;
  h.timeouts = 1;
  sm.set_http(h);
  const auto m = samples(sm.render());
  EXPECT_EQ(m.at("tokenhive_http_open_connections"), 7);
  EXPECT_EQ(m.at("tokenhive_http_requests_in_flight"), 2);
  EXPECT_EQ(m.at("tokenhive_http_connections_accepted_total"), 100);
  EXPECT_EQ(m.at("tokenhive_http_connections_rejected_total"), 3);
  EXPECT_EQ(m.at("tokenhive_http_requests_total"), 250);
  EXPECT_EQ(m.at("tokenhive_http_bad_requests_total"), 4);
  EXPECT_EQ(m.at("tokenhive_http_timeouts_total"), 1);
}

TEST(ServingMetrics, BuildInfo) {
  ServingMetrics sm("1.2.3 \"rc\"");
  EXPECT_EQ(samples(sm.render()).at("tokenhive_build_info{version=\"1.2.3 \\\"rc\\\"\"}"), 1);
}

TEST(ServingMetrics, BucketsAreIncreasing) {
  for (const auto* b : {&ServingMetrics::ttft_buckets(), &ServingMetrics::token_latency_buckets(),
                        &ServingMetrics::e2e_buckets(), &ServingMetrics::queue_buckets()}) {
    ASSERT_FALSE(b->empty());
    for (size_t i = 1; i < b->size(); ++i) EXPECT_LT((*b)[i - 1], (*b)[i]);
  }
}

std::string find_promtool() {
  if (const char* path = std::getenv("PATH")) {
    std::istringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':'))
      if (!dir.empty() && ::access((dir + "/promtool").c_str(), X_OK) == 0) return dir + "/promtool";
  }
  if (::access("/usr/bin/promtool", X_OK) == 0) return "/usr/bin/promtool";
  return "";
}

// Prometheus' own parser and linter accept the page: well-formed, and no lint warnings
// (counters end in _total, base units, help on every metric, ...).
TEST(ServingMetrics, PromtoolAcceptsThePage) {
  const std::string promtool = find_promtool();
  ASSERT_FALSE(promtool.empty()) << "promtool not found on PATH or at /usr/bin/promtool: run scripts/setup.sh "
                                    "(it installs Debian's prometheus package, which has promtool)";
  ServingMetrics sm("0.1.0-test");
  sm.record_request(finished(0.002, 0.03, {0.02, 0.04, 0.06}, 0.2), FinishReason::Stop);
  sm.record_request(finished(0.5, 1.5, {}, 1.5), FinishReason::Deadline);
  sm.record_rejected("rate_limited");
  sm.set_engine(engine_snapshot());
  http::HttpServerStats h;
  h.open_connections = 2;
  h.requests = 9;
  sm.set_http(h);
  const std::string page = sm.render();
  const std::string path = ::testing::TempDir() + "/th_metrics_" + std::to_string(::getpid()) + ".txt";
  {
    std::ofstream f(path, std::ios::binary);
    f << page;
  }
  const test::ProcessResult r = test::run_process({promtool, "check", "metrics"}, 60, path);
  ::unlink(path.c_str());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out + r.err, "") << page;
}

}  // namespace
}  // namespace th::server
