// The driver of `bench serve`: sends a workload's requests on the arrival schedule,
// at most --max-concurrency at a time, until --num-prompts were sent or --duration
// passed, each on a worker thread that blocks in the Sender; returns every record.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/serve_bench.h"
#include "bench/workload.h"

namespace th::bench {

/// @brief A snapshot for the progress line.
struct LoadProgress {
  double elapsed_s = 0;
  int64_t target = -1;  // requests the run will send; -1 when only --duration bounds it
  int64_t sent = 0, done = 0, failed = 0, in_flight = 0;
  int64_t output_tokens = 0;       // of the finished requests
  double recent_requests_per_s = 0;  // over the last few seconds
  double recent_tokens_per_s = 0;
  bool final = false;              // the last call, after every request finished
};

/// @brief "[ 120/1000] 31.8 s  3.9 req/s  498.2 tok/s  in flight 16  failed 0": one line, no newline.
std::string format_progress(const LoadProgress& p);

struct LoadOptions {
  int64_t num_prompts = 1000;  // 0: unbounded (then duration_s must bound the run)
  double duration_s = 0;       // > 0: nothing is sent after this many seconds (in-flight requests finish)
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  int64_t max_concurrency = 0;  // 0: no cap
  uint64_t seed = 0;
  double progress_interval_s = 0.25;
  std::function<void(const LoadProgress&)> on_progress;  // from a progress thread, then once with final
};

struct LoadResult {
  std::vector<RequestRecord> records;  // by index; times in seconds since the run started
  double duration_s = 0;               // from the start to the last request's end
  double start_unix_s = 0;             // the start on the system clock: records' times + this = Unix time
  int64_t max_in_flight = 0;
};

/// @brief Runs the load. Fails only on bad options; a request's failure is a record with !ok.
Result<LoadResult> run_load(const Workload& workload, const Sender& send, const LoadOptions& options);

}  // namespace th::bench
