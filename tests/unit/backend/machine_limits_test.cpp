// The machine-limit probes: every ISA variant this CPU runs gives a positive,
// finite rate, bad options are errors, and the bookkeeping (best >= median,
// one sample per repetition) holds. Sizes are small so this runs in well under
// a second; the numbers themselves are not checked (the machine is shared).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/machine_limits.h"

namespace th::cpu {
namespace {

void expect_rate(const ProbeRate& r, int reps) {
  ASSERT_EQ(r.samples.size(), static_cast<size_t>(reps));
  for (double s : r.samples) {
    EXPECT_TRUE(std::isfinite(s));
    EXPECT_GT(s, 0);
  }
  EXPECT_GE(r.best, r.median);
  EXPECT_GT(r.median, 0);
}

TEST(MachineLimits, BandwidthProbeOnSmallArrays) {
  for (int threads : {1, 2}) {
    BandwidthOptions o;
    o.total_bytes = size_t{8} << 20;
    o.n_threads = threads;
    o.reps = 3;
    Result<BandwidthResult> r = measure_bandwidth(o);
    ASSERT_TRUE(r.ok()) << r.message();
    expect_rate(r->read_gb_per_s, 3);
    expect_rate(r->triad_gb_per_s, 3);
    EXPECT_EQ(r->n_threads, threads);
    EXPECT_LE(r->total_bytes, o.total_bytes);
    EXPECT_GE(r->total_bytes, o.total_bytes - 3 * 64 * sizeof(float) * threads);
  }
}

TEST(MachineLimits, BandwidthProbeRejectsBadOptions) {
  BandwidthOptions o;
  o.total_bytes = 1000;
  EXPECT_FALSE(measure_bandwidth(o).ok());
  o.total_bytes = size_t{4} << 20;
  o.n_threads = 0;
  EXPECT_FALSE(measure_bandwidth(o).ok());
  o.n_threads = 1;
  o.reps = 0;
  EXPECT_FALSE(measure_bandwidth(o).ok());
}

TEST(MachineLimits, ComputeProbesRunOnEveryAvailableIsa) {
  for (Isa isa : available_isas()) {
    for (int threads : {1, 2}) {
      ComputeOptions o;
      o.isa = isa;
      o.n_threads = threads;
      o.reps = 2;
      o.seconds_per_rep = 0.005;
      Result<ComputeResult> f = measure_fp32_fma_peak(o);
      ASSERT_TRUE(f.ok()) << f.message();
      expect_rate(f->gops, 2);
      EXPECT_EQ(f->isa, isa);
      Result<ComputeResult> d = measure_int8_dot_peak(o);
      ASSERT_TRUE(d.ok()) << d.message();
      expect_rate(d->gops, 2);
    }
  }
}

TEST(MachineLimits, ComputeProbesRejectBadOptions) {
  ComputeOptions o;
  o.n_threads = 0;
  EXPECT_FALSE(measure_fp32_fma_peak(o).ok());
  o.n_threads = 1;
  o.seconds_per_rep = 0;
  EXPECT_FALSE(measure_int8_dot_peak(o).ok());
  if (!has_isa(Isa::Avx512)) {
    o.seconds_per_rep = 0.01;
    o.isa = Isa::Avx512;
    Result<ComputeResult> r = measure_fp32_fma_peak(o);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("avx512"), std::string::npos) << r.message();
  }
}

}  // namespace
}  // namespace th::cpu
