// One benchmark request against an OpenAI-compatible server: the streaming request
// body, and the reading of its server-sent events into a RequestRecord. The transport
// is a StreamFn, so the HTTP client plugs in with one lambda and tests script the events.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "bench/serve_bench.h"

namespace th::bench {

/// @brief POSTs `body` to `path` and calls on_event with each SSE `data:` payload (without
/// "data:" and the line ends) as it arrives; on_event returns false to stop reading. Returns
/// the transport's or the HTTP status's failure (a non-2xx answer, with its body's message).
using StreamFn = std::function<Status(const std::string& path, const std::string& body,
                                      const std::function<bool(std::string_view data)>& on_event)>;

struct OpenAiTarget {
  std::string endpoint = "/v1/completions";  // or a path ending in /chat/completions
  std::string model;                         // empty: not sent (the server's one model)
  bool send_priority = false;                // add `priority` (-1, 0, 1) to the body
  std::vector<std::string> compute_types;    // non-empty: request i sends compute_type [i % size]
  // "" (the server's default sampling), "greedy" (temperature 0), "seeded" (temperature 1 and
  // seed sampling_seed + index), "mixed" (even indices greedy, odd seeded): outputs that a
  // second run of the same workload must reproduce token for token (scripts/soak.sh).
  std::string sampling;
  uint64_t sampling_seed = 0;
  bool keep_text = false;  // RequestRecord::text gets the generated text
};

/// @brief "greedy" or "seeded": what `sampling` makes of request `index`; "" when nothing is set.
std::string_view sampling_of(const OpenAiTarget& target, int64_t index);

/// @brief Whether the endpoint takes chat messages rather than a prompt.
bool is_chat_endpoint(const std::string& endpoint);

/// @brief {"model", "prompt" (or "messages"), "max_tokens", "stream": true,
/// "stream_options": {"include_usage": true}, "ignore_eos", "priority", and with `sampling`
/// "temperature" (and "seed")}.
std::string openai_request_body(const BenchRequest& request, const OpenAiTarget& target);

/// @brief Sends the request and reads its stream: content chunks (completions' choices[0].text,
/// chat's choices[0].delta.content) time the first token and each chunk; the usage chunk gives
/// the token counts; "[DONE]" ends it. A transport failure, an `error` event, a payload that is
/// not JSON or a stream without content makes a failed record. Times are monotonic_s().
RequestRecord run_openai_stream(const StreamFn& stream, const BenchRequest& request, const OpenAiTarget& target);

}  // namespace th::bench
