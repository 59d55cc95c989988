// When and how long the client waits before trying a request again.
//
// Retried (any method: the API's requests have no side effects): a failed
// connect, a connection that closed or reset before any byte of a response
// came, and the statuses 429, 502, 503 and 504, unless a streamed response
// already gave the caller data. Never: other statuses, timeouts, malformed
// responses, a connection that broke after the response began.
//
// The delay before retry k (k = 0 for the first) is "full jitter":
// uniform(0, min(max_delay, base_delay * 2^k)), so a crowd of clients that
// failed together spreads out instead of coming back in step. A response
// with Retry-After (seconds, or an HTTP date) waits exactly that long
// instead; one that asks for more than max_delay is not retried (the caller
// gets that response: waiting less than the server asked is wasted load).
//
// Every retry costs a token from a RetryBudget shared by the client: each
// request adds `ratio` tokens, time adds `min_per_second`, at most
// `capacity` are held. Empty, the call fails at once with what it has, so a
// struggling server sees at most ~(1 + ratio) times the request rate, not
// max_attempts times.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <string_view>

namespace th::client {

using Clock = std::chrono::steady_clock;

struct RetryBudgetOptions {
  double ratio = 0.1;           // tokens a request adds: retries add at most 10% to the request rate
  double min_per_second = 1.0;  // tokens time adds: a few retries even at a low request rate
  double capacity = 10.0;       // tokens held at most (and at the start): the largest burst of retries
};

struct RetryOptions {
  int max_attempts = 3;  // tries in all, the first included; 1 = never retry
  std::chrono::milliseconds base_delay{100};
  std::chrono::milliseconds max_delay{5000};  // the jitter's ceiling and the longest Retry-After honoured
  RetryBudgetOptions budget;
  uint64_t seed = 0;  // the jitter's RNG; 0 = from std::random_device
  // How the client waits between tries; null = std::this_thread::sleep_for.
  // Tests pass one that records the delays (and sleeps, or not).
  std::function<void(std::chrono::milliseconds)> sleep;
};

/// @brief 429, 502, 503 and 504: the server or a proxy asks to come back later.
bool is_retryable_status(int status);

/// @brief The jitter's ceiling before retry `retry` (0 = the first):
/// min(max_delay, base_delay * 2^retry), without overflow for any retry.
std::chrono::milliseconds backoff_ceiling(int retry, std::chrono::milliseconds base_delay,
                                          std::chrono::milliseconds max_delay);

/// @brief A Retry-After value as a delay from `now`: delta-seconds ("120") or
/// an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"; a past date is 0).
/// nullopt when it is neither (then the header is ignored).
std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value,
                                                           std::chrono::system_clock::time_point now);

/// @brief Full-jitter delays from a seeded RNG. Thread-safe.
class Backoff {
 public:
  Backoff(std::chrono::milliseconds base_delay, std::chrono::milliseconds max_delay, uint64_t seed);
  /// @brief uniform(0, backoff_ceiling(retry)) in whole milliseconds, both ends included.
  std::chrono::milliseconds delay(int retry);

 private:
  std::chrono::milliseconds base_, max_;
  std::mutex mu_;
  std::mt19937_64 rng_;
};

/// @brief The token bucket retries spend from. Thread-safe; times are passed
/// in so tests need no clock.
class RetryBudget {
 public:
  RetryBudget(RetryBudgetOptions options, Clock::time_point now);
  /// @brief A request began: adds `ratio` tokens.
  void on_request(Clock::time_point now);
  /// @brief Takes one token for a retry; false (and takes nothing) with less than one.
  bool try_spend(Clock::time_point now);
  double tokens(Clock::time_point now);

 private:
  void refill(Clock::time_point now);  // with mu_ held

  RetryBudgetOptions options_;
  std::mutex mu_;
  double tokens_;
  Clock::time_point last_;
};

}  // namespace th::client
