#include "server/serving_metrics.h"

#include <algorithm>
#include <string>

#include "base/priority.h"

namespace th::server {

const std::vector<double>& ServingMetrics::ttft_buckets() {
  static const std::vector<double> b = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,   0.75,
                                        1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160., 640.0, 2560.0};
  return b;
}

const std::vector<double>& ServingMetrics::token_latency_buckets() {
  static const std::vector<double> b = {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15,
                                        0.2,   0.3,    0.4,   0.5,    0.75, 1.0,   2.5,  5.0,   7.5, 10.0,
                                        20.0,  40.0,   80.0};
  return b;
}

const std::vector<double>& ServingMetrics::e2e_buckets() {
  static const std::vector<double> b = {0.01, 0.025, 0.05, 0.1,  0.3,  0.5,  0.8,  1.0,   1.5,   2.0,    2.5,   5.0,  10.0,
                                        15.0, 20.0,  30.0, 40.0, 50.0, 60.0, 120., 240.0, 480.0, 960.0, 1920.0, 7680.0};
  return b;
}

const std::vector<double>& ServingMetrics::queue_buckets() {
  static const std::vector<double> b = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,  0.25,  0.5,  1.0,
                                        2.5,   5.0,    10.0,  20.0, 40.0,  80.0, 160., 320.0, 640.0};
  return b;
}

ServingMetrics::ServingMetrics(std::string_view version) {
  http::MetricsRegistry& r = registry_;
  r.gauge("tokenhive_build_info", "Always 1; the labels say which build serves.", {"version"}).with({version}).set(1);

  // Requests, as they finish.
  ttft_ = &r.histogram("tokenhive_time_to_first_token_seconds",
                       "Time from a request's arrival to its first generated token.", ttft_buckets())
               .with();
  tpot_ = &r.histogram("tokenhive_time_per_output_token_seconds",
                       "Per request with at least two generated tokens: the mean time between its tokens.",
                       token_latency_buckets())
               .with();
  itl_ = &r.histogram("tokenhive_inter_token_latency_seconds",
                      "Time between consecutive generated tokens of a request, every gap.", token_latency_buckets())
              .with();
  e2e_ = &r.histogram("tokenhive_e2e_request_latency_seconds",
                      "Time from a request's arrival to the end of its stream, whatever ended it.", e2e_buckets())
              .with();
  queue_ = &r.histogram("tokenhive_request_queue_time_seconds",
                        "Time from a request's arrival to the first engine step that computed any of it.",
                        queue_buckets())
                .with();
  prompt_tokens_ = &r.counter("tokenhive_prompt_tokens_total", "Prompt tokens of finished requests.").with();
  generation_tokens_ =
      &r.counter("tokenhive_generation_tokens_total", "Tokens generated for finished requests.").with();
  prefix_hit_tokens_ = &r.counter("tokenhive_prefix_cache_hit_tokens_total",
                                  "Prompt tokens of finished requests that their admission found in the prefix cache.")
                            .with();
  http::CounterFamily& outcomes =
      r.counter("tokenhive_requests_total", "Requests the engine ran to an end, by how they ended.", {"outcome"});
  for (FinishReason f : {FinishReason::Stop, FinishReason::Length, FinishReason::Cancelled, FinishReason::Deadline,
                         FinishReason::Error})
    outcome_[static_cast<size_t>(f)] = &outcomes.with({finish_reason_name(f)});
  http::CounterFamily& rejected = r.counter("tokenhive_requests_rejected_total",
                                      "Requests refused before the engine ran them, by reason.", {"reason"});
  for (size_t i = 0; i < std::size(kRejectReasons); ++i) rejected_[i] = &rejected.with({kRejectReasons[i]});

  calls_ = &r.counter("tokenhive_calls_total", "Choices of API calls that ended, by tenant, priority and finish reason.",
                      {"tenant", "priority", "outcome"});
  tenant_tokens_ = &r.counter("tokenhive_tenant_tokens_total", "Tokens generated for each tenant's calls.", {"tenant"});

  // The engine's snapshot.
  weight_bytes_ = &r.gauge("tokenhive_model_weight_bytes",
                           "Bytes of the weight matrices each loaded compute type computes with.", {"compute_type"});
  rank_weight_bytes_ = &r.gauge("tokenhive_tensor_parallel_weight_bytes",
                                "Under --tensor-parallel: bytes of each rank's shard of the weight matrices.", {"rank"});
  rank_resident_bytes_ = &r.gauge("tokenhive_tensor_parallel_resident_bytes",
                                  "Under --tensor-parallel: each rank's resident memory after the warm-up (VmRSS).",
                                  {"rank"});
  running_ = &r.gauge("tokenhive_requests_running", "Requests prefilling or decoding.").with();
  waiting_ = &r.gauge("tokenhive_requests_waiting", "Requests queued: never run, or preempted for recompute.").with();
  swapped_ = &r.gauge("tokenhive_requests_swapped", "Requests preempted with their KV in the host tier.").with();
  http::GaugeFamily& used = r.gauge("tokenhive_kv_blocks_used", "KV cache blocks in use, by tier.", {"tier"});
  // Not kv_blocks_total: a gauge named *_total reads as a counter (promtool's lint says so).
  http::GaugeFamily& total = r.gauge("tokenhive_kv_blocks_capacity", "KV cache blocks there are, by tier.", {"tier"});
  http::GaugeFamily& ratio =
      r.gauge("tokenhive_kv_usage_ratio", "KV cache blocks in use over blocks there are (0..1), by tier.", {"tier"});
  for (Tier t : {kPrimary, kHost}) {
    const std::string_view name = t == kPrimary ? "primary" : "host";
    kv_used_[t] = &used.with({name});
    kv_total_[t] = &total.with({name});
    kv_ratio_[t] = &ratio.with({name});
  }
  kv_cached_ = &r.gauge("tokenhive_kv_cached_blocks", "Primary-tier blocks listed in the prefix cache.").with();
  add_kv_cache_metrics();
  http::CounterFamily& preemptions =
      r.counter("tokenhive_preemptions_total", "Sequences preempted, by kind: swapped to the host tier or dropped "
                                               "for recompute.", {"kind"});
  preempt_swap_ = &preemptions.with({"swap"});
  preempt_recompute_ = &preemptions.with({"recompute"});
  steps_ = &r.counter("tokenhive_engine_steps_total", "Engine steps that had live requests.").with();
  tokens_computed_ = &r.counter("tokenhive_engine_tokens_computed_total",
                                "Tokens through the model: prompt chunks and decodes, recomputation included.")
                          .with();
  tokens_generated_ = &r.counter("tokenhive_engine_tokens_generated_total",
                                 "Tokens the engine generated and delivered to streams (stop tokens excluded).")
                           .with();
  compute_ratio_ = &r.gauge("tokenhive_engine_tokens_computed_per_generated",
                            "tokenhive_engine_tokens_computed_total over tokenhive_engine_tokens_generated_total "
                            "since start (0 before any token): prompts and recomputation after preemption raise it.")
                        .with();

  // The HTTP server's snapshot.
  http_open_ = &r.gauge("tokenhive_http_open_connections", "Open HTTP connections.").with();
  http_in_flight_ =
      &r.gauge("tokenhive_http_requests_in_flight", "HTTP requests dispatched whose response is not complete.").with();
  http_accepted_ = &r.counter("tokenhive_http_connections_accepted_total",
                              "HTTP connections accepted, those then refused for the connection limit included.")
                        .with();
  http_conn_rejected_ = &r.counter("tokenhive_http_connections_rejected_total",
                                   "HTTP connections refused (503) over the connection limit.")
                             .with();
  http_requests_ =
      &r.counter("tokenhive_http_requests_total", "HTTP requests dispatched to a handler or answered 404/405.").with();
  http_bad_requests_ =
      &r.counter("tokenhive_http_bad_requests_total", "Malformed HTTP requests, answered with an error and closed.")
           .with();
  http_timeouts_ =
      &r.counter("tokenhive_http_timeouts_total", "HTTP timeouts: 408s and writes given up on.").with();
  register_slo(r);
}

void ServingMetrics::record_call(std::string_view tenant, int32_t priority, std::string_view outcome,
                                 int64_t generated_tokens) {
  static constexpr std::string_view kOutcomes[] = {"stop", "length", "cancelled", "deadline", "error", "tool_calls"};
  const std::string_view o = std::find(std::begin(kOutcomes), std::end(kOutcomes), outcome) != std::end(kOutcomes) ? outcome : "other";
  const std::string p = priority >= -1 && priority <= 1 ? priority_name(priority) : "other";
  calls_->with({tenant, p, o}).inc();
  tenant_tokens_->with({tenant}).inc(static_cast<double>(generated_tokens));
}

void ServingMetrics::record_request(const RequestMetrics& m, FinishReason reason) {
  if (m.queue_seconds >= 0) queue_->observe(m.queue_seconds);
  if (m.ttft_seconds >= 0) ttft_->observe(m.ttft_seconds);
  if (m.e2e_seconds >= 0) e2e_->observe(m.e2e_seconds);
  if (!m.inter_token_seconds.empty()) {
    double sum = 0;
    for (double gap : m.inter_token_seconds) {
      itl_->observe(gap);
      sum += gap;
    }
    tpot_->observe(sum / static_cast<double>(m.inter_token_seconds.size()));
  }
  prompt_tokens_->inc(static_cast<double>(m.n_prompt));
  generation_tokens_->inc(static_cast<double>(m.n_generated));
  prefix_hit_tokens_->inc(static_cast<double>(m.prefix_hit_tokens));
  const size_t i = static_cast<size_t>(reason);
  if (i < std::size(outcome_)) outcome_[i]->inc();
}

void ServingMetrics::record_rejected(std::string_view reason) {
  const auto* it = std::find(std::begin(kRejectReasons), std::end(kRejectReasons), reason);
  if (it == std::end(kRejectReasons)) it = std::end(kRejectReasons) - 1;  // "other"
  rejected_[static_cast<size_t>(it - std::begin(kRejectReasons))]->inc();
}

void ServingMetrics::set_engine(const EngineStats& s) {
  running_->set(static_cast<double>(s.running));
  waiting_->set(static_cast<double>(s.waiting));
  swapped_->set(static_cast<double>(s.swapped));
  const int64_t used[2] = {s.kv.primary_used, s.kv.host_used};
  const int64_t total[2] = {s.kv.primary_blocks, s.kv.host_blocks};
  for (Tier t : {kPrimary, kHost}) {
    kv_used_[t]->set(static_cast<double>(used[t]));
    kv_total_[t]->set(static_cast<double>(total[t]));
    kv_ratio_[t]->set(total[t] > 0 ? static_cast<double>(used[t]) / static_cast<double>(total[t]) : 0.0);
  }
  kv_cached_->set(static_cast<double>(s.kv.cached_blocks));
  kv_host_cached_->set(static_cast<double>(s.kv.host_cached_blocks));
  const int64_t hit[2] = {s.kv.prefix_hit_tokens - s.kv.prefix_host_hit_tokens, s.kv.prefix_host_hit_tokens};
  const double lookups = static_cast<double>(s.kv.prefix_query_tokens);
  kv_lookup_tokens_->set_to_at_least(lookups);
  for (Tier t : {kPrimary, kHost}) {
    kv_hit_tokens_[t]->set_to_at_least(static_cast<double>(hit[t]));
    kv_hit_ratio_[t]->set(lookups > 0 ? static_cast<double>(hit[t]) / lookups : 0.0);
  }
  const int64_t moves[5] = {s.kv.demoted_blocks, s.kv.promoted_blocks, s.kv.swapped_in_blocks, s.kv.prefetched_blocks,
                            s.kv.prefetch_wasted_blocks};
  for (size_t k = 0; k < 5; ++k) kv_moves_[k]->set_to_at_least(static_cast<double>(moves[k]));
  kv_stall_->set_to_at_least(s.kv.swap_in_stall_seconds);
  preempt_swap_->set_to_at_least(static_cast<double>(s.preempted_swap));
  preempt_recompute_->set_to_at_least(static_cast<double>(s.preempted_recompute));
  steps_->set_to_at_least(static_cast<double>(s.steps));
  tokens_computed_->set_to_at_least(static_cast<double>(s.tokens_computed));
  tokens_generated_->set_to_at_least(static_cast<double>(s.tokens_generated));
  compute_ratio_->set(s.tokens_generated > 0
                          ? static_cast<double>(s.tokens_computed) / static_cast<double>(s.tokens_generated)
                          : 0.0);
  set_slo(s.slo);
}

void ServingMetrics::add_kv_cache_metrics() {
  http::MetricsRegistry& r = registry_;
  kv_host_cached_ = &r.gauge("tokenhive_kv_host_cached_blocks",
                             "Host-tier blocks listed in the host prefix cache (prefix blocks evicted from the primary tier).")
                         .with();
  http::GaugeFamily& ratio = r.gauge("tokenhive_kv_prefix_hit_ratio",
                                     "Prompt tokens admissions found in the tier's prefix cache over those looked up.", {"tier"});
  kv_lookup_tokens_ = &r.counter("tokenhive_kv_prefix_lookup_tokens_total", "Prompt tokens admissions looked up in the prefix cache.").with();
  http::CounterFamily& hits =
      r.counter("tokenhive_kv_prefix_hit_tokens_total", "Prompt tokens admissions found in the prefix cache, by tier.", {"tier"});
  for (Tier t : {kPrimary, kHost}) {
    const std::string_view name = t == kPrimary ? "primary" : "host";
    kv_hit_ratio_[t] = &ratio.with({name});
    kv_hit_tokens_[t] = &hits.with({name});
  }
  http::CounterFamily& moves = r.counter("tokenhive_kv_block_moves_total",
                                         "KV blocks moved between tiers: prefix blocks demoted and promoted, swapped-out "
                                         "blocks swapped in, of those prefetched by the copy thread, and prefetches wasted.",
                                         {"kind"});
  const std::string_view kinds[5] = {"demoted", "promoted", "swapped_in", "prefetched", "prefetch_wasted"};
  for (size_t k = 0; k < 5; ++k) kv_moves_[k] = &moves.with({kinds[k]});
  kv_stall_ = &r.counter("tokenhive_kv_swap_in_stall_seconds_total",
                         "Seconds the engine waited for host-to-primary KV copies (swap-ins and promotions not prefetched).")
                   .with();
}

void ServingMetrics::set_weight_bytes(std::string_view compute_type, double bytes) {
  weight_bytes_->with({compute_type}).set(bytes);
}

void ServingMetrics::set_rank_memory(int rank, double weight_bytes, double resident_bytes) {
  rank_weight_bytes_->with({std::to_string(rank)}).set(weight_bytes);
  rank_resident_bytes_->with({std::to_string(rank)}).set(resident_bytes);
}

void ServingMetrics::set_http(const http::HttpServerStats& s) {
  http_open_->set(static_cast<double>(s.open_connections));
  http_in_flight_->set(static_cast<double>(s.in_flight));
  http_accepted_->set_to_at_least(static_cast<double>(s.accepted));
  http_conn_rejected_->set_to_at_least(static_cast<double>(s.rejected));
  http_requests_->set_to_at_least(static_cast<double>(s.requests));
  http_bad_requests_->set_to_at_least(static_cast<double>(s.bad_requests));
  http_timeouts_->set_to_at_least(static_cast<double>(s.timeouts));
}

}  // namespace th::server
