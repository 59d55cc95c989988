#include "bench/arrival_process.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace th::bench {
namespace {

struct Moments {
  double mean = 0, variance = 0;
};

Moments sample(double rate, double burstiness, uint64_t seed, int n) {
  Result<ArrivalProcess> p = ArrivalProcess::create(rate, burstiness, seed);
  EXPECT_TRUE(p.ok());
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(p->next_interval());
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= n;
  for (double x : v) m.variance += (x - m.mean) * (x - m.mean);
  m.variance /= n - 1;
  return m;
}

// 200,000 samples: the sample mean's relative standard error is 1/sqrt(B * 200000), under 0.5%
// for B >= 0.25; the tolerances below are 3 to 5 standard errors.
TEST(ArrivalProcess, PoissonHasTheAskedMeanRateAndExponentialSpread) {
  const Moments m = sample(10.0, 1.0, 1, 200000);
  EXPECT_NEAR(1.0 / m.mean, 10.0, 10.0 * 0.01);
  EXPECT_NEAR(m.variance, 1.0 / 100, 0.03 / 100);  // exponential: variance = mean^2
}

TEST(ArrivalProcess, BurstinessIsTheGammaShape) {
  for (double b : {0.25, 0.5, 4.0}) {
    const double rate = 5.0;
    const Moments m = sample(rate, b, 2, 200000);
    EXPECT_NEAR(m.mean, 1.0 / rate, 0.015 / rate) << b;  // the mean never depends on B
    const double var = 1.0 / (rate * rate * b);     // shape B, scale 1/(R B)
    EXPECT_NEAR(m.variance / var, 1.0, 0.05) << b;
  }
}

TEST(ArrivalProcess, InfiniteRateSendsAtOnce) {
  Result<ArrivalProcess> p = ArrivalProcess::create(INFINITY, 1.0, 0);
  ASSERT_TRUE(p.ok());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(p->next_interval(), 0.0);
}

TEST(ArrivalProcess, SeededAndValidated) {
  Result<ArrivalProcess> a = ArrivalProcess::create(3, 0.7, 9), b = ArrivalProcess::create(3, 0.7, 9);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a->next_interval(), b->next_interval());
  EXPECT_FALSE(ArrivalProcess::create(0, 1, 0).ok());
  EXPECT_FALSE(ArrivalProcess::create(-1, 1, 0).ok());
  EXPECT_FALSE(ArrivalProcess::create(NAN, 1, 0).ok());
  EXPECT_FALSE(ArrivalProcess::create(1, 0, 0).ok());
  EXPECT_FALSE(ArrivalProcess::create(1, INFINITY, 0).ok());
}

}  // namespace
}  // namespace th::bench
