#include "bench/arrival_process.h"

#include <cmath>

namespace th::bench {

Result<ArrivalProcess> ArrivalProcess::create(double rate, double burstiness, uint64_t seed) {
  if (!(rate > 0)) return Status::error("--request-rate must be > 0 (inf: all at once)");
  if (!(burstiness > 0) || !std::isfinite(burstiness)) return Status::error("--burstiness must be > 0 and finite");
  // Its own stream: the schedule never shifts when the workload's draws change.
  return ArrivalProcess(rate, burstiness, mix64(seed ^ 0x61727269766c73ULL));
}

double ArrivalProcess::next_interval() {
  if (std::isinf(rate_)) return 0.0;
  return rng_.gamma(burstiness_, 1.0 / (rate_ * burstiness_));
}

}  // namespace th::bench
