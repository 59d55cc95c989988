// The numbers of a `bench serve` run, from its RequestRecords (definitions in
// docs/CONVENTIONS.md, "Benchmarking a server"):
//   TTFT  first content chunk - send
//   TPOT  (E2E - TTFT) / (output tokens - 1), for requests with >= 2 output tokens
//   ITL   every gap between consecutive content chunks
//   E2E   end of stream - send
// Distributions give mean, min, max and the p50/p90/p99 percentiles by linear
// interpolation between order statistics (numpy.percentile's default).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/serve_bench.h"

namespace th::bench {

/// @brief The p-th percentile (0..100) of sorted values, numpy's "linear" method: the
/// value at rank h = (n-1)*p/100, interpolated between v[floor(h)] and v[ceil(h)].
double percentile(const std::vector<double>& sorted, double p);

/// @brief A distribution's summary; all 0 with count 0 when there were no samples.
struct Distribution {
  int64_t count = 0;
  double mean = 0, min = 0, max = 0, p50 = 0, p90 = 0, p99 = 0;
};
Distribution summarize(std::vector<double> values);

/// @brief One completed request's latencies in milliseconds.
struct RequestLatencies {
  double ttft_ms = 0, e2e_ms = 0;
  std::optional<double> tpot_ms;  // only with >= 2 output tokens
  std::vector<double> itl_ms;
};
RequestLatencies request_latencies(const RequestRecord& r);

/// @brief --goodput: a request is good when it completed and meets every target given.
struct GoodputTargets {
  std::optional<double> ttft_ms, tpot_ms, e2e_ms;
  bool any() const { return ttft_ms || tpot_ms || e2e_ms; }
};
/// @brief Parses vLLM's form: items "ttft:MS", "tpot:MS", "e2el:MS" (also "e2e:MS"), or one
/// item holding several separated by spaces or commas.
Result<GoodputTargets> parse_goodput(const std::vector<std::string>& items);
/// @brief Whether a completed request meets the targets (a request with fewer than 2 tokens has
/// no TPOT and passes that target, as in vLLM).
bool is_good(const RequestLatencies& l, const GoodputTargets& t);

/// @brief The numbers of one class of requests (all of them, or one priority).
struct ClassStats {
  int64_t requests = 0, completed = 0, failed = 0;
  int64_t input_tokens = 0, output_tokens = 0;  // of completed requests
  double request_throughput = 0;   // completed / run duration
  double output_tokens_per_s = 0;  // output tokens / run duration
  double total_tokens_per_s = 0;   // (input + output tokens) / run duration
  std::optional<int64_t> good_requests;  // with --goodput
  std::optional<double> goodput_per_s;
  Distribution ttft_ms, tpot_ms, itl_ms, e2e_ms;
};

struct BenchStats {
  double duration_s = 0;
  ClassStats all;
  std::map<std::string, ClassStats> by_priority;  // the classes that had requests
  std::vector<std::pair<std::string, int64_t>> errors;  // distinct messages, most frequent first
  GoodputTargets goodput;
};

/// @brief Every statistic of a run; throughputs divide by duration_s (the whole run's wall time).
BenchStats compute_stats(const std::vector<RequestRecord>& records, double duration_s, const GoodputTargets& goodput);

}  // namespace th::bench
