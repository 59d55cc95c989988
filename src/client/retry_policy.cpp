#include "client/retry_policy.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <ctime>

namespace th::client {

bool is_retryable_status(int status) { return status == 429 || status == 502 || status == 503 || status == 504; }

std::chrono::milliseconds backoff_ceiling(int retry, std::chrono::milliseconds base_delay,
                                          std::chrono::milliseconds max_delay) {
  const int64_t base = std::max<int64_t>(0, base_delay.count());
  const int64_t cap = std::max<int64_t>(0, max_delay.count());
  int64_t ceiling = base;
  // Doubling stops at the cap, so no retry count overflows.
  for (int i = 0; i < retry && ceiling < cap; ++i) ceiling = ceiling == 0 ? 0 : ceiling * 2;
  return std::chrono::milliseconds(std::min(ceiling, cap));
}

namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

int parse_int(std::string_view s) {
  int v = 0;
  for (char c : s) v = v * 10 + (c - '0');
  return v;
}

// IMF-fixdate, RFC 9110 5.6.7: "Sun, 06 Nov 1994 08:49:37 GMT" (29 bytes).
std::optional<std::chrono::system_clock::time_point> parse_imf_fixdate(std::string_view s) {
  if (s.size() != 29 || s[3] != ',' || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' ||
      s[19] != ':' || s[22] != ':' || s.substr(25) != " GMT")
    return std::nullopt;
  static constexpr std::array<std::string_view, 7> kDays = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                               "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  if (std::find(kDays.begin(), kDays.end(), s.substr(0, 3)) == kDays.end()) return std::nullopt;
  const auto month = std::find(kMonths.begin(), kMonths.end(), s.substr(8, 3));
  if (month == kMonths.end()) return std::nullopt;
  const std::string_view day = s.substr(5, 2), year = s.substr(12, 4), hh = s.substr(17, 2), mm = s.substr(20, 2),
                         ss = s.substr(23, 2);
  if (!all_digits(day) || !all_digits(year) || !all_digits(hh) || !all_digits(mm) || !all_digits(ss))
    return std::nullopt;
  std::tm tm{};
  tm.tm_year = parse_int(year) - 1900;
  tm.tm_mon = static_cast<int>(month - kMonths.begin());
  tm.tm_mday = parse_int(day);
  tm.tm_hour = parse_int(hh);
  tm.tm_min = parse_int(mm);
  tm.tm_sec = parse_int(ss);
  if (tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60) return std::nullopt;
  const time_t t = ::timegm(&tm);
  return std::chrono::system_clock::from_time_t(t);
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value,
                                                           std::chrono::system_clock::time_point now) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (all_digits(value)) {
    // A day is more than any client waits; longer values are clamped, not overflowed.
    if (value.size() > 6) return std::chrono::milliseconds(std::chrono::hours(24 * 7));
    return std::chrono::seconds(parse_int(value));
  }
  const auto date = parse_imf_fixdate(value);
  if (!date) return std::nullopt;
  if (*date <= now) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(*date - now);
}

Backoff::Backoff(std::chrono::milliseconds base_delay, std::chrono::milliseconds max_delay, uint64_t seed)
    : base_(base_delay), max_(max_delay), rng_(seed != 0 ? seed : (uint64_t{std::random_device{}()} << 32 | std::random_device{}())) {}

std::chrono::milliseconds Backoff::delay(int retry) {
  const int64_t ceiling = backoff_ceiling(retry, base_, max_).count();
  std::uniform_int_distribution<int64_t> dist(0, ceiling);
  std::lock_guard<std::mutex> lock(mu_);
  return std::chrono::milliseconds(dist(rng_));
}

RetryBudget::RetryBudget(RetryBudgetOptions options, Clock::time_point now)
    : options_(options), tokens_(options.capacity), last_(now) {}

void RetryBudget::refill(Clock::time_point now) {
  if (now > last_) {
    tokens_ += options_.min_per_second * std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }
  tokens_ = std::min(tokens_, options_.capacity);
}

void RetryBudget::on_request(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  refill(now);
  tokens_ = std::min(tokens_ + options_.ratio, options_.capacity);
}

bool RetryBudget::try_spend(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  refill(now);
  if (tokens_ < 1.0 - 1e-9) return false;  // ten requests of 0.1 make one retry, rounding aside
  tokens_ -= 1.0;
  return true;
}

double RetryBudget::tokens(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  refill(now);
  return tokens_;
}

}  // namespace th::client
