#include "server/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/status.h"

namespace th::server {
namespace {

using Clock = RateLimiter::Clock;

// Slack for floating-point rounding in the refill sum: a request told to
// retry after N seconds must pass at N seconds, not miss by 1e-12 tokens.
double tolerance(double capacity) { return 1e-9 * std::max(1.0, capacity); }

// A Retry-After beyond this (~31 years) only arises from absurd debts on
// tiny rates; the cap keeps the conversion to integer seconds defined.
constexpr double kMaxRetrySeconds = 1e9;

template <class Bucket>
void refill(Bucket& b, double per_minute, Clock::time_point now) {
  if (now <= b.last) return;  // a clock that went back counts as no time
  double elapsed = std::chrono::duration<double>(now - b.last).count();
  b.level = std::min(per_minute, b.level + elapsed * per_minute / 60.0);
  b.last = now;
}

// Seconds until a bucket refilled at `per_minute` holds `need`; 0 when it does.
double wait_seconds(double level, double need, double per_minute) {
  double short_by = need - tolerance(per_minute) - level;
  return short_by <= 0 ? 0.0 : short_by * 60.0 / per_minute;
}

int64_t remaining(double level, double per_minute) {
  if (per_minute <= 0) return -1;
  return level <= 0 ? 0 : static_cast<int64_t>(std::floor(level));
}

}  // namespace

std::string_view limit_name(RateLimiter::Limit limit) {
  switch (limit) {
    case RateLimiter::Limit::None: return "none";
    case RateLimiter::Limit::Requests: return "requests per minute";
    case RateLimiter::Limit::Tokens: return "tokens per minute";
  }
  return "?";
}

http::ApiError rate_limit_error(const RateLimiter::Decision& d) {
  return http::ApiError{cat("rate limit reached for this key: ", limit_name(d.limit), " per minute; retry in ",
                            d.retry_after.count(), " s"),
                        "", std::nullopt, std::string("rate_limit_exceeded")};
}

RateLimiter::KeyBuckets& RateLimiter::buckets_for(const ApiKey& key, Clock::time_point now) {
  auto [it, inserted] = buckets_.try_emplace(key.key);
  KeyBuckets& kb = it->second;
  if (inserted) {
    kb.requests = {key.requests_per_minute, now};
    kb.tokens = {key.tokens_per_minute, now};
  }
  refill(kb.requests, key.requests_per_minute, now);
  refill(kb.tokens, key.tokens_per_minute, now);
  return kb;
}

RateLimiter::Decision RateLimiter::admit(const ApiKey& key, int64_t tokens_estimate, Clock::time_point now) {
  const double rpm = key.requests_per_minute, tpm = key.tokens_per_minute;
  const double tokens = static_cast<double>(std::max<int64_t>(tokens_estimate, 0));
  Decision d;
  if (rpm <= 0 && tpm <= 0) return d;

  std::lock_guard<std::mutex> lock(mu_);
  KeyBuckets& kb = buckets_for(key, now);
  // A cost over the capacity needs only a full bucket (the header's rule).
  double wait_requests = rpm > 0 ? wait_seconds(kb.requests.level, std::min(1.0, rpm), rpm) : 0;
  double wait_tokens = tpm > 0 ? wait_seconds(kb.tokens.level, std::min(tokens, tpm), tpm) : 0;
  if (wait_requests > 0 || wait_tokens > 0) {
    d.allowed = false;
    d.limit = wait_requests >= wait_tokens ? Limit::Requests : Limit::Tokens;
    double wait = std::min(std::max(wait_requests, wait_tokens), kMaxRetrySeconds);
    d.retry_after = std::chrono::seconds(std::max<int64_t>(1, static_cast<int64_t>(std::ceil(wait))));
  } else {
    if (rpm > 0) kb.requests.level -= 1.0;
    if (tpm > 0) kb.tokens.level -= tokens;
  }
  d.remaining_requests = remaining(kb.requests.level, rpm);
  d.remaining_tokens = remaining(kb.tokens.level, tpm);
  return d;
}

void RateLimiter::charge(const ApiKey& key, int64_t extra_tokens, Clock::time_point now) {
  const double tpm = key.tokens_per_minute;
  if (tpm <= 0 || extra_tokens == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  KeyBuckets& kb = buckets_for(key, now);
  kb.tokens.level = std::min(tpm, kb.tokens.level - static_cast<double>(extra_tokens));
}

double RateLimiter::tokens_available(const ApiKey& key, Clock::time_point now) {
  if (key.tokens_per_minute <= 0) return std::numeric_limits<double>::infinity();
  std::lock_guard<std::mutex> lock(mu_);
  return buckets_for(key, now).tokens.level;
}

double RateLimiter::requests_available(const ApiKey& key, Clock::time_point now) {
  if (key.requests_per_minute <= 0) return std::numeric_limits<double>::infinity();
  std::lock_guard<std::mutex> lock(mu_);
  return buckets_for(key, now).requests.level;
}

}  // namespace th::server
