// `tokenhive bench serve`: the types every part of the load generator shares.
// A Workload makes BenchRequests, the driver (load_driver.h) sends them on a
// schedule (arrival_process.h) through a Sender, and gets back RequestRecords
// that bench_stats.h turns into TTFT, TPOT, ITL, E2E and throughput.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace th::bench {

/// @brief One request of a workload, whatever the protocol that sends it.
struct BenchRequest {
  int64_t index = 0;              // position in the workload (0, 1, ...)
  std::string prompt;             // text: any server's tokenizer can read it
  int64_t input_tokens_hint = 0;  // the workload's intended prompt length in tokens (the server's usage is the truth)
  int64_t max_tokens = 0;
  std::string priority = "normal";  // "high" | "normal" | "low"
  bool ignore_eos = true;         // so that every request generates exactly max_tokens
};

/// @brief What happened to one request. Times are seconds on monotonic_s()'s clock as a
/// Sender fills them; the driver rebases them to seconds since the bench started.
struct RequestRecord {
  int64_t index = 0;
  bool ok = false;
  std::string error;                // one line, when !ok
  double send_s = 0;                // just before the request was written
  double first_token_s = 0;         // the first chunk with content (0 when none came)
  double end_s = 0;                 // the stream's end (or the failure)
  std::vector<double> token_times_s;  // each content chunk's arrival, the first included
  int64_t output_tokens = 0;        // the server's usage.completion_tokens when given, else content chunks
  int64_t prompt_tokens = 0;        // the server's usage.prompt_tokens when given, else the workload's hint
  std::string priority = "normal";
  std::string text;                 // the generated text, when the target keeps it (OpenAiTarget::keep_text)
};

/// @brief Sends one request and waits for its end. Called from many threads at once.
using Sender = std::function<RequestRecord(const BenchRequest&)>;

/// @brief Seconds on the steady clock (an arbitrary epoch): the clock RequestRecords are filled with.
inline double monotonic_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// @brief The priority classes, most important first, and their wire values (lower = more
/// important, as vLLM and our server read `priority`).
inline constexpr const char* kPriorityNames[] = {"high", "normal", "low"};
inline int priority_value(const std::string& name) { return name == "high" ? -1 : name == "low" ? 1 : 0; }

}  // namespace th::bench
