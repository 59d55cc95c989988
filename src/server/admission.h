// Admission of a tokenized call, before the engine sees it: the server's room
// (choices in the engine at once), the tenant's concurrency cap (calls in
// flight per tenant) and the key's rate limits (requests and tokens per
// minute, charged up front with the most the call can cost and settled when
// it ends). Responder thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "http/http_response.h"
#include "server/api_call.h"

namespace th::server {

class RateLimiter;

/// @brief Why a call was turned away: the status, the OpenAI error, the reason the
/// metrics and logs name ("queue_full", "rate_limited"), and a Retry-After (0: the default).
struct Refusal {
  int status = 429;
  http::ApiError error;
  std::string reason;
  std::chrono::seconds retry_after{0};
};

class Admission {
 public:
  /// @brief `rate_limiter` may be null (no rate limits); not owned.
  Admission(int64_t max_pending, RateLimiter* rate_limiter) : max_pending_(max_pending), rate_limiter_(rate_limiter) {}

  /// @brief Admits `c` (tokenized: prompt_ids set) given `pending` choices already in the
  /// engine, or says why not. Admitted, it may hold a tenant slot (c.holds_slot) and a
  /// rate-limit charge (c.token_estimate), which release() gives back.
  std::optional<Refusal> admit(Call& c, int64_t pending, ApiClock::time_point now);
  /// @brief The call is over: its tenant slot is freed and its charge settled with the
  /// tokens it really used (prompt + generated). Idempotent for the slot.
  void release(Call& c, int64_t tokens_used, ApiClock::time_point now);
  /// @brief The most a call can cost: its prompts, and max_tokens per choice (256 when
  /// unbounded, as a rate-limit estimate only).
  static int64_t token_estimate(const Call& c);
  /// @brief Calls in flight of `tenant` counted against its cap.
  int64_t in_flight(const std::string& tenant) const;

 private:
  int64_t max_pending_;
  RateLimiter* rate_limiter_;
  std::unordered_map<std::string, int64_t> tenant_in_flight_;  // tenants with a concurrency cap
};

}  // namespace th::server
