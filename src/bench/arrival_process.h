// When requests are sent: vLLM's arrival process. Inter-arrival times are gamma
// distributed with shape B (--burstiness) and scale 1/(R*B), so their mean is 1/R
// (--request-rate) whatever B: B = 1 is a Poisson process, B < 1 burstier, B > 1
// more regular (variance 1/(R^2 B)). An infinite rate sends everything at once.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "bench/bench_random.h"

namespace th::bench {

class ArrivalProcess {
 public:
  /// @brief rate: requests/s, > 0 (inf: no waiting); burstiness: the gamma shape, > 0 and finite.
  static Result<ArrivalProcess> create(double rate, double burstiness, uint64_t seed);
  /// @brief Seconds from the previous arrival to the next.
  double next_interval();
  double rate() const { return rate_; }
  double burstiness() const { return burstiness_; }

 private:
  ArrivalProcess(double rate, double burstiness, uint64_t seed) : rate_(rate), burstiness_(burstiness), rng_(seed) {}
  double rate_, burstiness_;
  BenchRng rng_;
};

}  // namespace th::bench
