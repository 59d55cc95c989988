// ServingMetrics' SLO scheduling families (documented in serving_metrics.h).
#include <string>

#include "base/priority.h"
#include "server/serving_metrics.h"

namespace th::server {

void ServingMetrics::register_slo(http::MetricsRegistry& r) {
  http::GaugeFamily& cost = r.gauge("tokenhive_step_cost_coefficient",
                                    "The learned cost of an engine step (recursive least squares, refit every step): "
                                    "seconds fixed, per decode token, per prompt token, per KV position read.",
                                    {"term"});
  const char* terms[4] = {"fixed_seconds", "decode_seconds", "prompt_token_seconds", "kv_position_seconds"};
  for (int i = 0; i < 4; ++i) slo_cost_[i] = &cost.with({terms[i]});
  slo_cost_samples_ = &r.gauge("tokenhive_step_cost_samples", "Engine steps the step cost fit has seen.").with();
  slo_budget_ = &r.gauge("tokenhive_slo_step_token_budget", "The last step's token budget (static, or set by the TPOT target).").with();
  slo_max_seqs_ = &r.gauge("tokenhive_slo_step_max_seqs", "The last step's cap on running sequences.").with();
  slo_predicted_ = &r.gauge("tokenhive_step_predicted_seconds", "The last SLO-sized step's predicted duration.").with();
  slo_last_step_ = &r.gauge("tokenhive_step_last_seconds", "The last step's measured duration.").with();
  slo_sized_ = &r.counter("tokenhive_slo_sized_steps_total", "Engine steps whose limits a TPOT target set.").with();
  slo_finished_ = &r.counter("tokenhive_slo_requests_total",
                             "Completed requests of priority classes that have a latency target.", {"priority"});
  slo_missed_ = &r.counter("tokenhive_slo_missed_total",
                           "Completed requests that missed their class's target, by class and target (ttft, tpot).",
                           {"priority", "slo"});
  window_holds_ = &r.counter("tokenhive_batch_window_holds_total",
                             "Times an idle engine held arrivals for --batch-window-ms.").with();
  window_seconds_ =
      &r.counter("tokenhive_batch_window_seconds_total", "Seconds an idle engine held arrivals in all.").with();
}

void ServingMetrics::set_slo(const SloStats& s) {
  for (int i = 0; i < 4; ++i) slo_cost_[i]->set(s.cost[static_cast<size_t>(i)]);
  slo_cost_samples_->set(static_cast<double>(s.cost_samples));
  slo_budget_->set(static_cast<double>(s.token_budget));
  slo_max_seqs_->set(static_cast<double>(s.max_seqs));
  slo_predicted_->set(s.predicted_step_seconds);
  slo_last_step_->set(s.last_step_seconds);
  slo_sized_->set_to_at_least(static_cast<double>(s.sized_steps));
  window_holds_->set_to_at_least(static_cast<double>(s.window_holds));
  window_seconds_->set_to_at_least(s.window_seconds);
  for (const auto& [priority, c] : s.classes) {
    const std::string p = priority_name(priority);
    slo_finished_->with({p}).set_to_at_least(static_cast<double>(c.finished));
    slo_missed_->with({p, "ttft"}).set_to_at_least(static_cast<double>(c.ttft_missed));
    slo_missed_->with({p, "tpot"}).set_to_at_least(static_cast<double>(c.tpot_missed));
  }
}

}  // namespace th::server
