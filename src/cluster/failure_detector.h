// Whether a cell is alive, from its heartbeats: the router asks each cell for
// GET /admin/load every heartbeat interval and tells this detector how each
// try went. Time is passed in (steady_clock time points), never read here, so
// the rules are testable without sleeping.
//
// States: kUnknown until the first heartbeat answers (a new cell gets no work
// before it has answered once; failures before that leave it unknown, since
// there is nothing to lose), then kAlive; kDead when either
//   - no heartbeat has succeeded for `timeout` (>=, measured from the last
//     success), or
//   - `failures_to_dead` heartbeats in a row failed (refused, reset, timed
//     out, non-200).
// A dead cell is alive again at its next successful heartbeat (it rejoins at
// once; the router starts sending it work again).
//
// Why the defaults (250 ms, 2 failures) detect a dead cell in under 500 ms
// with a 50 ms heartbeat interval, provided check() runs at least once an
// interval:
//   - A killed cell: its port refuses connections at once, so each heartbeat
//     fails immediately. The next heartbeat comes within 50 ms of the kill
//     and the one after 50 ms later: dead within ~100 ms (plus a connect's
//     round trip).
//   - A SIGSTOPped (hung) cell: the kernel still accepts the connection but
//     nothing answers, so no heartbeat fails fast. The last success was at
//     or before the stop, so the timeout path declares it dead by
//     stop + 250 ms + one check interval (50 ms) = 300 ms at the latest
//     (sooner if the heartbeats' own request timeout makes them fail twice).
// 250 ms is five intervals: one slow answer (a long prefill step holding the
// cell's loop, a scheduling hiccup on a loaded host) does not kill a cell,
// and neither does a single refused or reset connection (2 in a row needed).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace th::cluster {

using Clock = std::chrono::steady_clock;

struct FailureDetectorOptions {
  std::chrono::milliseconds timeout{250};  // no successful heartbeat for this long: dead
  int failures_to_dead = 2;                // or this many consecutive failed heartbeats (a refused connection fails at once)
};

enum class CellHealth : uint8_t { kUnknown, kAlive, kDead };

/// @brief "unknown", "alive" or "dead" (for logs and the router's admin output).
std::string_view cell_health_name(CellHealth h);

/// @brief One cell's heartbeat failure detector. Not thread-safe: the router
/// keeps one per cell under that cell's lock.
class FailureDetector {
 public:
  explicit FailureDetector(FailureDetectorOptions o = {});

  /// @brief A heartbeat answered: alive (a dead cell rejoins at once), the
  /// failure count back to 0.
  void on_success(Clock::time_point now);
  /// @brief A heartbeat failed (refused, reset, timed out, non-200). Turns an
  /// alive cell dead at once when it makes `failures_to_dead` in a row, or
  /// when the timeout has passed.
  void on_failure(Clock::time_point now);
  /// @brief Re-evaluates the state at `now`; returns the new state. When it
  /// turns dead, detection_latency() is set.
  CellHealth check(Clock::time_point now);

  CellHealth health() const { return health_; }
  /// @brief How long after the last successful heartbeat the death was
  /// declared (the detection time, an upper bound on failure->detection).
  /// nullopt before the first death; the latest death's after that.
  std::optional<std::chrono::nanoseconds> detection_latency() const { return detection_latency_; }
  /// @brief Times it turned dead.
  uint64_t deaths() const { return deaths_; }
  /// @brief Failed heartbeats since the last success (or since the start).
  int consecutive_failures() const { return consecutive_failures_; }
  /// @brief When the last heartbeat answered; nullopt before the first.
  std::optional<Clock::time_point> last_success() const { return last_success_; }
  const FailureDetectorOptions& options() const { return options_; }

 private:
  void evaluate(Clock::time_point now);

  FailureDetectorOptions options_;
  CellHealth health_ = CellHealth::kUnknown;
  std::optional<Clock::time_point> last_success_;
  int consecutive_failures_ = 0;
  uint64_t deaths_ = 0;
  std::optional<std::chrono::nanoseconds> detection_latency_;
};

}  // namespace th::cluster
