// Per-key rate limits: a token bucket for requests per minute and one for
// tokens per minute, each holding at most one minute's worth (the burst),
// starting full and refilling continuously at rate/60 per second.
//
// A request costs 1 from the request bucket and its token estimate (prompt
// tokens + max_tokens, say) from the token bucket, both or neither. When the
// request finishes, `charge` settles the difference between the real count
// and the estimate; the bucket may go negative, and later requests wait until
// it has refilled.
//
// The rule for a cost larger than the bucket (an estimate of 10k tokens on a
// 5k tpm key, or any request on rpm=0.5): the request is admitted when the
// bucket is FULL, and the whole cost is debited, taking the bucket negative.
// Demanding the whole cost would starve such a request forever; admitting it
// on a full bucket and making the next requests wait for the debt keeps the
// long-run rate at the limit. In general a request needs min(cost, capacity)
// in the bucket and is debited its full cost.
//
// Time is passed in (`now`), so tests drive a fake clock; a `now` earlier
// than one already seen counts as no time passing.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "http/http_response.h"
#include "server/api_keys.h"

namespace th::server {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  enum class Limit : uint8_t { None, Requests, Tokens };

  struct Decision {
    bool allowed = true;
    Limit limit = Limit::None;              // when denied: the limit that binds longest
    std::chrono::seconds retry_after{0};    // when denied: >= 1, rounded up; both limits pass by then
    // After this decision; -1 for an unlimited one (x-ratelimit-remaining-* headers).
    int64_t remaining_requests = -1;
    int64_t remaining_tokens = -1;
  };

  /// @brief Admits a request of `key` estimated at `tokens_estimate` tokens
  /// (negative counts as 0) and debits both buckets, or denies it having
  /// debited nothing. Thread-safe.
  Decision admit(const ApiKey& key, int64_t tokens_estimate, Clock::time_point now);

  /// @brief Settles a finished request: `extra_tokens` = real - estimate
  /// (negative refunds, up to a full bucket). Thread-safe.
  void charge(const ApiKey& key, int64_t extra_tokens, Clock::time_point now);

  /// @brief The tokens the key's token bucket holds at `now` (may be
  /// negative); +infinity when unlimited. For tests and metrics.
  double tokens_available(const ApiKey& key, Clock::time_point now);
  /// @brief The same for the request bucket.
  double requests_available(const ApiKey& key, Clock::time_point now);

 private:
  struct Bucket {
    double level = 0;
    Clock::time_point last{};
  };
  struct KeyBuckets {
    Bucket requests, tokens;
  };

  KeyBuckets& buckets_for(const ApiKey& key, Clock::time_point now);

  std::mutex mu_;
  // Keyed by the key itself, so that buckets survive a store reload. Only
  // authenticated keys reach here, so the map's size is bounded by the store's.
  std::unordered_map<std::string, KeyBuckets> buckets_;
};

/// @brief "requests per minute", "tokens per minute", "none".
std::string_view limit_name(RateLimiter::Limit limit);

/// @brief The 429's error for a denied decision (code rate_limit_exceeded; the caller adds
/// Retry-After from d.retry_after): one wording for generations and embeddings.
http::ApiError rate_limit_error(const RateLimiter::Decision& d);

}  // namespace th::server
