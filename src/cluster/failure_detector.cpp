#include "cluster/failure_detector.h"

namespace th::cluster {

std::string_view cell_health_name(CellHealth h) {
  switch (h) {
    case CellHealth::kUnknown: return "unknown";
    case CellHealth::kAlive: return "alive";
    case CellHealth::kDead: return "dead";
  }
  return "unknown";
}

FailureDetector::FailureDetector(FailureDetectorOptions o) : options_(o) {}

void FailureDetector::on_success(Clock::time_point now) {
  // Heartbeats may be reported out of order (two in flight); the latest wins.
  if (!last_success_ || now > *last_success_) last_success_ = now;
  consecutive_failures_ = 0;
  health_ = CellHealth::kAlive;
}

void FailureDetector::on_failure(Clock::time_point now) {
  ++consecutive_failures_;
  evaluate(now);
}

CellHealth FailureDetector::check(Clock::time_point now) {
  evaluate(now);
  return health_;
}

void FailureDetector::evaluate(Clock::time_point now) {
  // Only an alive cell can die: unknown stays unknown until it answers once,
  // dead stays dead until it answers again.
  if (health_ != CellHealth::kAlive || !last_success_) return;
  // A time before the last success (a caller's stale `now`) counts as no time passed.
  const Clock::duration silence = now > *last_success_ ? now - *last_success_ : Clock::duration::zero();
  const bool timed_out = silence >= options_.timeout;
  const bool refused = consecutive_failures_ >= options_.failures_to_dead;
  if (!timed_out && !refused) return;
  health_ = CellHealth::kDead;
  ++deaths_;
  detection_latency_ = std::chrono::duration_cast<std::chrono::nanoseconds>(silence);
}

}  // namespace th::cluster
