// The metrics `GET /metrics` serves for `tokenhive serve`, in Prometheus' text
// format. The API layer feeds them: record_request when a request's stream
// finishes, record_rejected when it refuses one before the engine runs it, and
// set_engine / set_http with the latest snapshots just before rendering.
//
// Requests: tokenhive_requests_total{outcome} counts requests the engine ran to
// an end (outcome = the finish reason: stop, length, cancelled, deadline,
// error); requests refused before that are tokenhive_requests_rejected_total{reason}
// (invalid, unauthorized, rate_limited, queue_full, not_ready, too_large,
// other), so that requests_total matches the engine's finished count and a
// rejection storm cannot hide in a latency histogram.
//
// The series (every one rendered from the start, 0 until fed):
//   tokenhive_build_info{version} 1
//   record_request: histograms tokenhive_time_to_first_token_seconds,
//     tokenhive_time_per_output_token_seconds (per request: the mean of its
//     inter-token gaps, when it has one or more), tokenhive_inter_token_latency_seconds
//     (every gap), tokenhive_e2e_request_latency_seconds,
//     tokenhive_request_queue_time_seconds; counters tokenhive_prompt_tokens_total,
//     tokenhive_generation_tokens_total, tokenhive_prefix_cache_hit_tokens_total,
//     tokenhive_requests_total{outcome}
//   record_rejected: tokenhive_requests_rejected_total{reason}
//   set_engine: gauges tokenhive_requests_{running,waiting,swapped},
//     tokenhive_kv_blocks_used{tier}, tokenhive_kv_blocks_capacity{tier} (not
//     *_total: promtool's lint reserves that suffix for counters),
//     tokenhive_kv_usage_ratio{tier} (tier = primary | host), tokenhive_kv_cached_blocks,
//     tokenhive_kv_host_cached_blocks, tokenhive_kv_prefix_hit_ratio{tier} (prompt tokens
//     found in that tier's prefix cache over those looked up, since start);
//     counters tokenhive_kv_prefix_lookup_tokens_total, tokenhive_kv_prefix_hit_tokens_total{tier},
//     tokenhive_kv_block_moves_total{kind = demoted | promoted | swapped_in | prefetched |
//     prefetch_wasted}, tokenhive_kv_swap_in_stall_seconds_total (divide by
//     tokenhive_engine_steps_total for the stall per step);
//     counters raised to the snapshot's cumulative values (never lowered):
//     tokenhive_preemptions_total{kind = swap | recompute}, tokenhive_engine_steps_total,
//     tokenhive_engine_tokens_computed_total, tokenhive_engine_tokens_generated_total;
//     gauge tokenhive_engine_tokens_computed_per_generated (their ratio: about
//     (prompt + generated) / generated when nothing is recomputed)
//   set_weight_bytes: gauge tokenhive_model_weight_bytes{compute_type}, the bytes of the
//     matrices each loaded compute type computes with (native: the file's own)
//   set_engine, SLO scheduling: gauges tokenhive_step_cost_coefficient{term = fixed_seconds |
//     decode_seconds | prompt_token_seconds | kv_position_seconds} (the learned step cost) and
//     tokenhive_step_cost_samples, tokenhive_slo_step_token_budget, tokenhive_slo_step_max_seqs,
//     tokenhive_step_predicted_seconds, tokenhive_step_last_seconds; counters
//     tokenhive_slo_sized_steps_total, tokenhive_slo_requests_total{priority} (completed requests
//     of classes with a target), tokenhive_slo_missed_total{priority, slo = ttft | tpot},
//     tokenhive_batch_window_holds_total, tokenhive_batch_window_seconds_total
//   set_http: gauges tokenhive_http_open_connections, tokenhive_http_requests_in_flight;
//     counters tokenhive_http_connections_{accepted,rejected}_total,
//     tokenhive_http_requests_total, tokenhive_http_bad_requests_total,
//     tokenhive_http_timeouts_total
//
// Buckets (seconds), chosen to cover a GPU's few-ms decode steps and a CPU's
// slow prefill of long prompts alike:
//   time to first token   1 ms .. 2560 s  (vLLM's, 22 buckets)
//   per output token, and
//   inter-token latency   1 ms .. 80 s    (vLLM's from 10 ms, plus 1, 2.5, 5, 7.5 ms for fast GPUs and small models)
//   end-to-end latency    10 ms .. 7680 s (vLLM's from 0.3 s, plus 10..100 ms for short requests)
//   queue time            1 ms .. 640 s
// A latency the request never reached (ttft of a request cancelled while queued) is
// not observed; e2e always is.
#pragma once

#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_stats.h"
#include "engine/finish_reason.h"
#include "engine/request.h"
#include "http/http_server_options.h"
#include "http/metrics.h"

namespace th::server {

/// @brief Every method may be called from any thread.
class ServingMetrics {
 public:
  /// @brief `version` goes into tokenhive_build_info{version="..."} 1.
  explicit ServingMetrics(std::string_view version = "dev");

  /// @brief A request's stream finished (any reason): its latencies and token counts.
  void record_request(const RequestMetrics& m, FinishReason reason);
  /// @brief A request refused before the engine ran it. `reason` is one of invalid, unauthorized,
  /// rate_limited, queue_full, not_ready, too_large; anything else counts as "other" (the label's
  /// values stay a fixed, small set).
  void record_rejected(std::string_view reason);
  /// @brief A call's choice ended with `outcome` (its finish_reason): counted by tenant ("" without
  /// --api-keys; the key file bounds them), priority (high, normal, low; any other number as
  /// "other") and outcome (the finish reasons; anything else "other"), and its generated tokens
  /// by tenant. The dashboard's requests by priority and per-tenant rates.
  void record_call(std::string_view tenant, int32_t priority, std::string_view outcome, int64_t generated_tokens);
  /// @brief The engine's latest snapshot: gauges, and its cumulative counts as counters.
  void set_engine(const EngineStats& s);
  /// @brief The memory of one compute type's weights (set once per loaded type at start).
  void set_weight_bytes(std::string_view compute_type, double bytes);
  /// Under --tensor-parallel: rank r's weight-matrix bytes and resident bytes (after warm-up).
  void set_rank_memory(int rank, double weight_bytes, double resident_bytes);
  /// @brief The HTTP server's latest snapshot.
  void set_http(const http::HttpServerStats& s);

  /// @brief Every metric, in the text exposition format 0.0.4 (kPrometheusContentType).
  std::string render() const { return registry_.render(); }
  const http::MetricsRegistry& registry() const { return registry_; }

  // The buckets' upper bounds, seconds (documented above).
  static const std::vector<double>& ttft_buckets();
  static const std::vector<double>& token_latency_buckets();  // per output token and inter-token
  static const std::vector<double>& e2e_buckets();
  static const std::vector<double>& queue_buckets();
  static constexpr std::string_view kRejectReasons[] = {"invalid",   "unauthorized", "rate_limited", "queue_full",
                                                        "not_ready", "too_large",    "other"};

 private:
  enum Tier { kPrimary, kHost };

  http::MetricsRegistry registry_;
  // Children looked up once, at construction: recording is atomics (and a histogram's mutex),
  // never a map lookup.
  http::Histogram *ttft_, *tpot_, *itl_, *e2e_, *queue_;
  http::Counter *prompt_tokens_, *generation_tokens_, *prefix_hit_tokens_;
  http::Counter* outcome_[5];  // by FinishReason
  http::Counter* rejected_[std::size(kRejectReasons)];
  http::CounterFamily *calls_, *tenant_tokens_;

  http::Gauge *running_, *waiting_, *swapped_;
  http::Gauge *kv_used_[2], *kv_total_[2], *kv_ratio_[2], *kv_cached_;
  http::Counter *preempt_swap_, *preempt_recompute_, *steps_, *tokens_computed_, *tokens_generated_;
  http::Gauge *kv_host_cached_, *kv_hit_ratio_[2];
  http::Counter *kv_lookup_tokens_, *kv_hit_tokens_[2], *kv_moves_[5], *kv_stall_;
  void add_kv_cache_metrics();
  http::Gauge* compute_ratio_;
  http::GaugeFamily* weight_bytes_;
  http::GaugeFamily *rank_weight_bytes_, *rank_resident_bytes_;

  // SLO scheduling (serving_metrics_slo.cpp): the step cost fit, the step limits, misses by class.
  void register_slo(http::MetricsRegistry& r);
  void set_slo(const SloStats& s);
  http::Gauge *slo_cost_[4], *slo_cost_samples_, *slo_budget_, *slo_max_seqs_, *slo_predicted_, *slo_last_step_;
  http::Counter *slo_sized_, *window_holds_, *window_seconds_;
  http::CounterFamily *slo_finished_, *slo_missed_;

  http::Gauge *http_open_, *http_in_flight_;
  http::Counter *http_accepted_, *http_conn_rejected_, *http_requests_, *http_bad_requests_, *http_timeouts_;
};

}  // namespace th::server
