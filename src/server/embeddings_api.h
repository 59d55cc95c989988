// POST /v1/embeddings (OpenAI's shape): `input` as a string, an array of strings, an array of
// token ids or an array of such arrays; `encoding_format` "float" or "base64" (little-endian
// float32, as OpenAI's); `dimensions` only as the model's hidden size. Each input is one
// engine request with a Pooling (mean or last over the prompt's final hidden states, after
// the output norm), batched with everything else the engine runs; the vectors are
// L2-normalized here. The answer: {"object": "list", "data": [{"object": "embedding",
// "index", "embedding"}], "model", "usage": {"prompt_tokens", "total_tokens"}}.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "http/http_request.h"
#include "http/http_response.h"
#include "http/response_writer.h"
#include "server/api_keys.h"
#include "server/api_request.h"
#include "server/call_record.h"

namespace th {
class Engine;
class Tokenizer;
}  // namespace th

namespace th::server {

struct EmbeddingsRequest {
  std::string model;               // empty: the served model
  std::vector<ApiPrompt> inputs;   // at least one
  bool base64 = false;             // encoding_format
  std::optional<int64_t> dimensions;
  std::string user;
};

/// @brief Parses and validates a body; a 400 naming the field otherwise ("input[2]",
/// "encoding_format"). Fields not listed here are refused by name.
std::variant<EmbeddingsRequest, http::ApiError> parse_embeddings_request(std::string_view body,
                                                                         const ApiRequestLimits& limits = {});

/// @brief Scales `v` to unit L2 norm (a zero vector stays zero).
void l2_normalize(std::vector<float>& v);

/// @brief The floats as OpenAI's base64: their little-endian float32 bytes, base64-encoded.
std::string base64_floats(const std::vector<float>& v);

/// @brief The answer's body for normalized vectors (one per input, in order).
nlohmann::ordered_json embeddings_body(const std::vector<std::vector<float>>& vectors, bool base64,
                                       std::string_view model, int64_t prompt_tokens);

/// @brief Runs embedding requests through the engine and answers them: the HTTP handler
/// parses, tokenizes and submits (no waiting); a thread of its own collects each request's
/// vectors when the engine's events arrive and sends the answer. A client that goes away
/// cancels its requests in the engine.
class ServingMetrics;
class RateLimiter;

struct EmbeddingServiceOptions {
  std::string model_name;
  ApiRequestLimits limits;
  int64_t max_pending = 256;                    // inputs in the engine at once; past it, 429
  std::function<void(const CallRecord&)> log;   // each request's record when answered (may be empty)
  ServingMetrics* metrics = nullptr;             // each input counts as an engine request; refusals by reason
  RateLimiter* rate_limiter = nullptr;           // a key's requests and tokens per minute, as generations'
};

class EmbeddingService {
 public:
  /// The access and audit logs' line for a request (`log`) is a generation's; with keys, a
  /// request costs 1 request and its prompt tokens from the key's rate limits (429 with
  /// Retry-After past them, as a generation).
  EmbeddingService(Engine& engine, const Tokenizer& tok, Pooling pooling, int64_t hidden_size, EmbeddingServiceOptions options);
  /// @brief Cancels what is still running and stops the thread.
  ~EmbeddingService();
  EmbeddingService(const EmbeddingService&) = delete;
  EmbeddingService& operator=(const EmbeddingService&) = delete;

  /// @brief POST /v1/embeddings, after the caller's readiness and key checks; `key` (null
  /// without keys) gives the tenant (the prefix cache's namespace).
  void handle(const http::HttpRequest& r, http::ResponseWriter w, const ApiKey* key);
  /// @brief Requests accepted and not yet answered (a drain waits for them).
  int64_t in_flight() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace th::server
