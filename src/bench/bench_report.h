// What a `bench serve` run prints and saves: the table on stdout, the --json object,
// and --compare's side-by-side view of two saved runs.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "base/status.h"
#include "bench/bench_stats.h"

namespace th::bench {

/// @brief The --json object: requests, completed, failed, input_tokens, output_tokens,
/// duration_s, request_throughput, output_tokens_per_s, total_tokens_per_s, good_requests and
/// goodput_per_s (null without --goodput), ttft_ms/tpot_ms/itl_ms/e2e_ms as {count, mean, min,
/// max, p50, p90, p99} (values null without samples), the same per class under `by_priority`,
/// then `goodput_targets`, `errors` ({message, count}) and `config` (the run's settings, as given).
nlohmann::json stats_json(const BenchStats& stats, const nlohmann::json& config);

/// @brief The human-readable result: one column for all requests and one per priority class.
std::string stats_table(const BenchStats& stats, const std::string& title);

/// @brief Two --json results side by side with ratios B/A ("-" where a value is missing or A is 0).
std::string compare_table(const nlohmann::json& a, const nlohmann::json& b, const std::string& name_a,
                          const std::string& name_b);

/// @brief Reads a --json result file for --compare.
Result<nlohmann::json> read_stats_json(const std::string& path);

}  // namespace th::bench
