#include "server/admission.h"

#include "base/status.h"
#include "server/rate_limiter.h"

namespace th::server {

int64_t Admission::token_estimate(const Call& c) {
  const ApiRequest& q = c.req;
  int64_t estimate = 0;
  for (const std::vector<int32_t>& p : c.prompt_ids) estimate += static_cast<int64_t>(p.size());
  estimate += static_cast<int64_t>(c.prompt_ids.size()) * q.n * (q.max_tokens > 0 ? q.max_tokens : 256);
  return estimate;
}

std::optional<Refusal> Admission::admit(Call& c, int64_t pending, ApiClock::time_point now) {
  const int64_t n_choices = static_cast<int64_t>(c.prompt_ids.size()) * c.req.n;
  if (pending + n_choices > max_pending_)
    return Refusal{429,
                   http::ApiError{cat("the server is at capacity (", max_pending_, " requests in flight); retry later"), "",
                                  std::nullopt, std::string("queue_full")},
                   "queue_full"};
  if (c.key && c.key->max_concurrency > 0) {
    int64_t& busy = tenant_in_flight_[c.tenant];
    if (busy >= c.key->max_concurrency)
      return Refusal{429,
                     http::ApiError{cat("this tenant has ", busy, " requests in flight, its limit; retry when one finishes"), "",
                                    std::nullopt, std::string("concurrency_limit_exceeded")},
                     "rate_limited"};
    ++busy;
    c.holds_slot = true;
  }
  if (c.key && rate_limiter_) {
    const int64_t estimate = token_estimate(c);
    RateLimiter::Decision d = rate_limiter_->admit(*c.key, estimate, now);
    if (!d.allowed)
      return Refusal{429, rate_limit_error(d), "rate_limited", d.retry_after};
    c.token_estimate = estimate;
  }
  return std::nullopt;
}

void Admission::release(Call& c, int64_t tokens_used, ApiClock::time_point now) {
  if (c.holds_slot) {
    c.holds_slot = false;
    auto it = tenant_in_flight_.find(c.tenant);
    if (it != tenant_in_flight_.end() && --it->second <= 0) tenant_in_flight_.erase(it);
  }
  if (c.key && rate_limiter_ && c.token_estimate > 0) {
    rate_limiter_->charge(*c.key, tokens_used - c.token_estimate, now);
    c.token_estimate = 0;
  }
}

int64_t Admission::in_flight(const std::string& tenant) const {
  auto it = tenant_in_flight_.find(tenant);
  return it == tenant_in_flight_.end() ? 0 : it->second;
}

}  // namespace th::server
