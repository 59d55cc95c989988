// A generation request as the engine takes it: typed and complete. The API
// layer parses and tokenizes; nothing past this point sees JSON or text.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/priority.h"
#include "base/status.h"
#include "engine/finish_reason.h"
#include "engine/sampler.h"
#include "engine/token_constraint.h"
#include "model/compute_type.h"

namespace th {


/// @brief How an embedding request pools its prompt's final hidden states; None: a generation.
enum class Pooling : uint8_t { None, Mean, Last };

struct GenerateRequest {
  std::vector<int32_t> prompt;          // token ids; start with BOS for "from BOS"
  SamplingParams sampling;              // its seed keys the draws: same request, same tokens
  int64_t max_tokens = -1;              // tokens to generate at most; -1: until a stop or the context is full
  std::vector<int32_t> stop_token_ids;  // stop at these too (even with ignore_eos)
  bool ignore_eos = false;              // go on past end-of-generation tokens
  int32_t priority = 0;                 // lower = more important; see Priority
  // The weight copy it computes with (model/compute_type.h); Auto is the engine's default,
  // resolved at submission. A type the model did not load is refused, never substituted.
  ComputeType compute_type = ComputeType::Auto;
  std::string tenant;                   // prefix-cache namespace: tenants never share cached blocks
  std::string cache_salt;               // further isolation within a tenant
  std::optional<std::chrono::steady_clock::time_point> deadline;  // unfinished then: FinishReason::Deadline
  int32_t logprobs = -1;                // -1: none; 0: the chosen token's; k in 1..20: also the k most likely
  int64_t min_tokens = 0;               // end-of-generation and stop tokens cannot be drawn before this many
  // Mean or Last: an embedding request. Nothing is sampled; once its prompt is computed it
  // finishes (Stop) with one event carrying the pooled hidden state. Mean pooling computes
  // every prompt token itself (no prefix-cache hits: a cached token's hidden state is gone).
  Pooling pooling = Pooling::None;
  // Structured output: masks the logits before every draw (logprobs stay the model's). Owned
  // by this request alone: its state is the tokens generated so far.
  std::shared_ptr<TokenConstraint> constraint;

  GenerateRequest& set_priority(Priority p) {
    priority = static_cast<int32_t>(p);
    return *this;
  }
};

/// @brief A token's log-probability under the model's distribution (raw logits, before
/// penalties and temperature, as vLLM reports them).
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

/// @brief One event of a request's result stream. The last event has `finish` set; it carries
/// the last token (for Length) or no token (token == -1: Stop, Cancelled, Deadline, Error).
/// A stop token ends the stream without being emitted.
struct TokenEvent {
  int32_t token = -1;
  int64_t position = -1;  // the token's index in the sequence (the prompt's come first)
  float logprob = 0;      // of `token`, when the request asked for logprobs
  std::vector<TokenLogprob> top_logprobs;
  std::optional<FinishReason> finish;
  std::string error;      // with FinishReason::Error
  std::vector<float> embedding;  // an embedding request's final event: the pooled state (not normalized)
};

/// @brief Latencies of one request, complete once its stream has finished.
struct RequestMetrics {
  double queue_seconds = -1;  // submission to first step that computed any of it
  double ttft_seconds = -1;   // submission to first generated token
  double e2e_seconds = -1;    // submission to the end of its stream (every finish reason)
  std::vector<double> inter_token_seconds;  // between consecutive generated tokens
  int64_t n_prompt = 0, n_generated = 0;
  int64_t n_preemptions = 0;
  int64_t prefix_hit_tokens = 0;  // prompt tokens its first admission found cached
};

}  // namespace th
