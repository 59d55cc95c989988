#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/philox.h"

namespace th {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// ---------------------------------------------------------------- Philox

// Random123's tests/kat_vectors, philox4x32 10 lines: counter, key, expected.
static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0}) ==
              PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});

TEST(Philox, Random123KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(
      philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
      (PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(
      philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
      (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(CounterUniform, IsTop24BitsOfFirstWordWithLowWordsFirst) {
  const uint64_t seed = 0x299f31d0a4093822ull;
  const uint64_t pos = 0x85a308d3243f6a88ull;
  const PhiloxCounter out = philox4x32_10({0x243f6a88, 0x85a308d3, 0, 0}, {0xa4093822, 0x299f31d0});
  EXPECT_EQ(counter_uniform(seed, pos), static_cast<float>(out[0] >> 8) / 16777216.0f);
  // Key and counter all zero: 0x6627e8d5 >> 8 = 0x6627e8.
  EXPECT_EQ(counter_uniform(0, 0), static_cast<float>(0x6627e8) / 16777216.0f);
}

TEST(CounterUniform, InUnitIntervalAndDeterministic) {
  for (uint64_t seed : {0ull, 1ull, 42ull, ~0ull}) {
    for (uint64_t pos = 0; pos < 2000; ++pos) {
      const float u = counter_uniform(seed, pos);
      ASSERT_GE(u, 0.0f);
      ASSERT_LT(u, 1.0f);
      ASSERT_EQ(u, counter_uniform(seed, pos));
    }
  }
  EXPECT_LT(counter_uniform(~0ull, ~0ull), 1.0f);
}

TEST(CounterUniform, DiffersAcrossPositionsAndSeeds) {
  std::set<float> by_position, by_seed;
  for (uint64_t i = 0; i < 1000; ++i) {
    by_position.insert(counter_uniform(7, i));
    by_seed.insert(counter_uniform(i, 7));
  }
  // 24-bit values: a birthday collision among 1000 is possible (~3%) but not many.
  EXPECT_GE(by_position.size(), 995u);
  EXPECT_GE(by_seed.size(), 995u);
  // The high halves of seed and position matter too.
  EXPECT_NE(counter_uniform(1, 0), counter_uniform(1ull | (1ull << 32), 0));
  EXPECT_NE(counter_uniform(1, 0), counter_uniform(1, 1ull << 32));
}

double chi_square_uniform(const std::vector<float>& draws, int bins) {
  std::vector<int> count(static_cast<size_t>(bins), 0);
  for (float u : draws) ++count[static_cast<size_t>(u * static_cast<float>(bins))];
  const double expected = static_cast<double>(draws.size()) / bins;
  double chi2 = 0.0;
  for (int c : count) chi2 += (c - expected) * (c - expected) / expected;
  return chi2;
}

TEST(CounterUniform, ChiSquareUniformOver100kDraws) {
  // 100 bins: 99 degrees of freedom, mean 99, sd 14. 200 is > 7 sd out; and
  // the seeds are fixed, so this either always passes or always fails.
  std::vector<float> along_positions, along_seeds;
  for (uint64_t i = 0; i < 100000; ++i) {
    along_positions.push_back(counter_uniform(20240601, i));
    along_seeds.push_back(counter_uniform(i, 3));
  }
  EXPECT_LT(chi_square_uniform(along_positions, 100), 200.0);
  EXPECT_LT(chi_square_uniform(along_seeds, 100), 200.0);
}

// ---------------------------------------------------------------- helpers

SamplingParams plain() {  // every processor off, temperature 1
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

int32_t sample_once(const SamplingParams& p, std::vector<float> logits,
                    const std::vector<int32_t>& history = {}, uint64_t position = 0) {
  Sampler s(p);
  return s.sample(logits, history, position);
}

// The tokens the truncating processors let through: a huge temperature (applied
// after truncation) makes the survivors near-equally likely, so 2000 draws hit
// every one of them (a miss has odds below 1e-40 for up to 10 survivors).
std::set<int32_t> survivors(SamplingParams p, const std::vector<float>& logits,
                            const std::vector<int32_t>& history = {}) {
  p.temperature = 1e6f;
  Sampler s(p);
  std::set<int32_t> seen;
  for (uint64_t pos = 0; pos < 2000; ++pos) {
    std::vector<float> l = logits;
    seen.insert(s.sample(l, history, pos));
  }
  return seen;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  double m = -INFINITY;
  for (float l : logits) m = std::max(m, static_cast<double>(l));
  std::vector<double> p;
  double z = 0.0;
  for (float l : logits) z += std::exp((l - m) / temperature);
  for (float l : logits) p.push_back(std::exp((l - m) / temperature) / z);
  return p;
}

// ---------------------------------------------------------------- greedy

TEST(SamplerGreedy, PicksArgmaxTiesToLowestIdAndIgnoresSeed) {
  SamplingParams p;
  p.temperature = 0.0f;
  for (uint64_t seed : {0ull, 1ull, 99ull}) {
    p.seed = seed;
    for (uint64_t pos : {0ull, 5ull, 1000ull}) {
      EXPECT_EQ(sample_once(p, {0.1f, 3.0f, -2.0f, 2.9f}, {}, pos), 1);
      EXPECT_EQ(sample_once(p, {1.0f, 4.0f, 2.0f, 4.0f, 4.0f}, {}, pos), 1);
    }
  }
}

TEST(SamplerGreedy, IgnoresNanAndHandlesInfinities) {
  SamplingParams p;
  p.temperature = 0.0f;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(sample_once(p, {nan, 1.0f, nan, 2.0f}), 3);
  EXPECT_EQ(sample_once(p, {-kInf, -kInf, -kInf}), 0);
  EXPECT_EQ(sample_once(p, {nan, nan}), 0);
  EXPECT_EQ(sample_once(p, {1.0f, kInf, kInf}), 1);
}

TEST(SamplerGreedy, SeesPenalisedLogits) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repeat_penalty = 2.0f;
  EXPECT_EQ(sample_once(p, {2.0f, 1.5f}, {0}), 1);    // 2 / 2 = 1 < 1.5
  EXPECT_EQ(sample_once(p, {-1.0f, -1.5f}, {0}), 1);  // -1 * 2 = -2 < -1.5
}

TEST(Sampler, EmptyLogitsGiveMinusOne) {
  std::vector<float> none;
  Sampler s(SamplingParams{});
  EXPECT_EQ(s.sample(none, {}, 0), -1);
}

// ---------------------------------------------------------------- top-k

TEST(SamplerTopK, KeepsTheKHighest) {
  SamplingParams p = plain();
  p.top_k = 3;
  EXPECT_EQ(survivors(p, {1, 5, 3, 5, 2, 4}), (std::set<int32_t>{1, 3, 5}));
  p.top_k = 1;
  EXPECT_EQ(survivors(p, {1, 5, 3, 5, 2, 4}), (std::set<int32_t>{1}));
}

TEST(SamplerTopK, TiesAtTheCutGoToLowerIds) {
  SamplingParams p = plain();
  p.top_k = 2;
  EXPECT_EQ(survivors(p, {3, 7, 7, 7, 1}), (std::set<int32_t>{1, 2}));
  p.top_k = 4;
  EXPECT_EQ(survivors(p, {2, 2, 2, 2, 2, 2}), (std::set<int32_t>{0, 1, 2, 3}));
}

TEST(SamplerTopK, OffOrLargerThanVocabKeepsAll) {
  SamplingParams p = plain();
  const std::vector<float> logits = {0, 1, 2, -1};
  for (int k : {0, 4, 5, 100000}) {
    p.top_k = k;
    EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{0, 1, 2, 3})) << "top_k=" << k;
  }
}

TEST(SamplerTopK, LargeVocabKeepsExactlyTheTopK) {
  // 20000 tokens, rising then falling so the running bar is both raised often
  // and rarely: exercises the buffer cut many times.
  std::vector<float> logits(20000);
  for (size_t i = 0; i < logits.size(); ++i) {
    logits[i] = static_cast<float>(i < 10000 ? i : 20000 - i) * 0.001f;
  }
  SamplingParams p = plain();
  p.top_k = 5;
  // The peak: 10000 -> 10.0; 9999 and 10001 -> 9.999; 9998 and 10002 -> 9.998.
  EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{9998, 9999, 10000, 10001, 10002}));
  std::vector<float> rising(5000);
  for (size_t i = 0; i < rising.size(); ++i) rising[i] = static_cast<float>(i);
  p.top_k = 3;
  EXPECT_EQ(survivors(p, rising), (std::set<int32_t>{4997, 4998, 4999}));
}

// ---------------------------------------------------------------- top-p

TEST(SamplerTopP, StopsWhereTheMassIsExactlyReached) {
  // Four equal logits: probabilities exactly 0.25 each, ranked by id.
  const std::vector<float> eq = {0, 0, 0, 0};
  SamplingParams p = plain();
  p.top_p = 0.5f;  // 0.25 + 0.25 reaches 0.5 exactly: two tokens, not three
  EXPECT_EQ(survivors(p, eq), (std::set<int32_t>{0, 1}));
  p.top_p = std::nextafter(0.5f, 1.0f);  // a hair more needs a third
  EXPECT_EQ(survivors(p, eq), (std::set<int32_t>{0, 1, 2}));
  p.top_p = 0.25f;
  EXPECT_EQ(survivors(p, eq), (std::set<int32_t>{0}));
  p.top_p = 0.75f;
  EXPECT_EQ(survivors(p, eq), (std::set<int32_t>{0, 1, 2}));
}

TEST(SamplerTopP, KeepsAtLeastOneAndOffAtOne) {
  SamplingParams p = plain();
  p.top_p = 1e-6f;
  EXPECT_EQ(survivors(p, {1, 2, 3}), (std::set<int32_t>{2}));
  p.top_p = 1.0f;
  EXPECT_EQ(survivors(p, {1, 2, 3}), (std::set<int32_t>{0, 1, 2}));
}

TEST(SamplerTopP, SmallestPrefixByProbability) {
  // Probabilities 0.5, 0.25, 0.125, 0.125 (to float rounding); cut points away
  // from the exact sums.
  const std::vector<float> logits = {std::log(4.0f), std::log(2.0f), 0.0f, 0.0f};
  SamplingParams p = plain();
  p.top_p = 0.45f;
  EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{0}));
  p.top_p = 0.6f;
  EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{0, 1}));
  p.top_p = 0.8f;
  EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{0, 1, 2}));
  p.top_p = 0.9f;
  EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{0, 1, 2, 3}));
}

TEST(SamplerTopP, MeasuresMassAfterTopK) {
  // top-k leaves two equal tokens at 0.5 each, so top_p 0.5 keeps one; over
  // all four tokens it would have kept two.
  SamplingParams p = plain();
  p.top_k = 2;
  p.top_p = 0.5f;
  EXPECT_EQ(survivors(p, {0, 0, 0, 0}), (std::set<int32_t>{0}));
}

TEST(SamplerTopP, IgnoresTemperature) {
  // top-p runs before temperature: temperature 0.25 would put 16/17 = 0.94 on
  // token 0, but at temperature 1 it has 2/3, so top_p 0.8 must keep both.
  SamplingParams p = plain();
  p.top_p = 0.8f;
  p.temperature = 0.25f;
  std::set<int32_t> seen;
  Sampler s(p);
  for (uint64_t pos = 0; pos < 3000; ++pos) {
    std::vector<float> l = {std::log(2.0f), 0.0f};
    seen.insert(s.sample(l, {}, pos));
  }
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1}));
}

// ---------------------------------------------------------------- min-p

TEST(SamplerMinP, KeepsTokensWithinFractionOfTheTop) {
  // Probabilities 0.4, 0.3, 0.2, 0.06, 0.04.
  std::vector<float> logits;
  for (float q : {0.4f, 0.3f, 0.2f, 0.06f, 0.04f}) logits.push_back(std::log(q));
  SamplingParams p = plain();
  p.min_p = 0.12f;  // bar 0.048
  EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{0, 1, 2, 3}));
  p.min_p = 0.55f;  // bar 0.22
  EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{0, 1}));
  p.min_p = 0.05f;  // bar 0.02
  EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{0, 1, 2, 3, 4}));
}

TEST(SamplerMinP, OneKeepsExactlyTheTiedTop) {
  SamplingParams p = plain();
  p.min_p = 1.0f;  // p_i >= p_max holds with equality for ties
  EXPECT_EQ(survivors(p, {2, 1, 2, 0}), (std::set<int32_t>{0, 2}));
}

TEST(SamplerMinP, ComposesWithTopPAsTheShorterPrefix) {
  std::vector<float> logits;
  for (float q : {0.4f, 0.3f, 0.2f, 0.06f, 0.04f}) logits.push_back(std::log(q));
  SamplingParams p = plain();
  p.top_p = 0.8f;   // 0.4, 0.7, 0.9: three tokens
  p.min_p = 0.12f;  // four tokens
  EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{0, 1, 2}));
  p.top_p = 0.95f;  // 0.96 after four tokens
  p.min_p = 0.55f;  // two tokens
  EXPECT_EQ(survivors(p, logits), (std::set<int32_t>{0, 1}));
}

// ---------------------------------------------------------------- penalties

// The penalties are applied to the caller's logits in place, so they can be
// checked directly.
std::vector<float> penalised(const SamplingParams& p, std::vector<float> logits,
                             const std::vector<int32_t>& history) {
  Sampler s(p);
  (void)s.sample(logits, history, 0);
  return logits;
}

TEST(SamplerPenalties, RepeatDividesPositiveAndMultipliesNegative) {
  SamplingParams p = plain();
  p.repeat_penalty = 2.0f;
  EXPECT_EQ(penalised(p, {2.0f, -2.0f, 1.0f, 0.5f, 0.0f}, {0, 1, 4}),
            (std::vector<float>{1.0f, -4.0f, 1.0f, 0.5f, 0.0f}));
  // Once per distinct token, however often it repeats.
  EXPECT_EQ(penalised(p, {4.0f, -1.0f}, {0, 0, 0, 1, 1}), (std::vector<float>{2.0f, -2.0f}));
  // A penalty below 1 encourages repeats.
  p.repeat_penalty = 0.5f;
  EXPECT_EQ(penalised(p, {2.0f, -2.0f}, {0, 1}), (std::vector<float>{4.0f, -1.0f}));
}

TEST(SamplerPenalties, PresenceOnceFrequencyPerCount) {
  SamplingParams p = plain();
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  // counts: token 0 x3, token 1 x1, token 2 x2, token 3 none
  EXPECT_EQ(penalised(p, {0, 0, 0, 0}, {0, 0, 2, 0, 1, 2}),
            (std::vector<float>{-1.25f, -0.75f, -1.0f, 0.0f}));
  // Negative values reward: OpenAI's range allows it.
  p.presence_penalty = -1.0f;
  p.frequency_penalty = 0.0f;
  EXPECT_EQ(penalised(p, {0, 0}, {1, 1}), (std::vector<float>{0.0f, 1.0f}));
}

TEST(SamplerPenalties, RepeatThenFrequencyThenPresence) {
  SamplingParams p = plain();
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.5f;
  // 2 / 2 - (2 * 0.5 + 0.5) = -0.5
  EXPECT_EQ(penalised(p, {2.0f, 3.0f}, {0, 0}), (std::vector<float>{-0.5f, 3.0f}));
}

TEST(SamplerPenalties, OnlyTheLastRepeatLastNCount) {
  SamplingParams p = plain();
  p.frequency_penalty = 1.0f;
  const std::vector<int32_t> history = {0, 0, 0, 1, 2, 2};
  p.repeat_last_n = 3;  // window {1, 2, 2}
  EXPECT_EQ(penalised(p, {0, 0, 0}, history), (std::vector<float>{0, -1, -2}));
  p.repeat_last_n = 4;  // window {0, 1, 2, 2}
  EXPECT_EQ(penalised(p, {0, 0, 0}, history), (std::vector<float>{-1, -1, -2}));
  p.repeat_last_n = -1;  // all
  EXPECT_EQ(penalised(p, {0, 0, 0}, history), (std::vector<float>{-3, -1, -2}));
  p.repeat_last_n = 100;  // longer than the history: all
  EXPECT_EQ(penalised(p, {0, 0, 0}, history), (std::vector<float>{-3, -1, -2}));
  p.repeat_last_n = 0;  // off
  EXPECT_EQ(penalised(p, {0, 0, 0}, history), (std::vector<float>{0, 0, 0}));
}

TEST(SamplerPenalties, IgnoreTokensOutsideTheVocab) {
  SamplingParams p = plain();
  p.repeat_penalty = 2.0f;
  p.presence_penalty = 1.0f;
  EXPECT_EQ(penalised(p, {2.0f, 2.0f}, {-5, 1, 2, 99}), (std::vector<float>{2.0f, 0.0f}));
}

TEST(SamplerPenalties, DefaultsLeaveLogitsAlone) {
  EXPECT_EQ(penalised(SamplingParams{}, {1.0f, -1.0f}, {0, 1, 0}),
            (std::vector<float>{1.0f, -1.0f}));
}

// ---------------------------------------------------------------- distribution

// Samples N positions and checks each token's frequency against softmax within
// 5 standard errors (fixed seed: deterministic, and far from the edge).
std::vector<double> frequencies(const SamplingParams& p, const std::vector<float>& logits, int n) {
  Sampler s(p);
  std::vector<double> freq(logits.size(), 0.0);
  for (int pos = 0; pos < n; ++pos) {
    std::vector<float> l = logits;
    freq[static_cast<size_t>(s.sample(l, {}, static_cast<uint64_t>(pos)))] += 1.0 / n;
  }
  return freq;
}

TEST(SamplerDistribution, MatchesSoftmaxAtTemperatureOne) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -2.0f, 0.25f};
  constexpr int kN = 200000;
  SamplingParams p = plain();
  p.seed = 1234;
  const std::vector<double> want = softmax(logits, 1.0);
  const std::vector<double> got = frequencies(p, logits, kN);
  for (size_t i = 0; i < logits.size(); ++i) {
    const double se = std::sqrt(want[i] * (1 - want[i]) / kN);
    EXPECT_NEAR(got[i], want[i], 5 * se) << "token " << i;
  }
}

TEST(SamplerDistribution, HalfTemperatureSharpens) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, -1.0f};
  constexpr int kN = 200000;
  SamplingParams p = plain();
  p.seed = 77;
  const std::vector<double> at1 = frequencies(p, logits, kN);
  p.temperature = 0.5f;
  const std::vector<double> at_half = frequencies(p, logits, kN);
  const std::vector<double> want = softmax(logits, 0.5);
  for (size_t i = 0; i < logits.size(); ++i) {
    const double se = std::sqrt(want[i] * (1 - want[i]) / kN);
    EXPECT_NEAR(at_half[i], want[i], 5 * se) << "token " << i;
  }
  EXPECT_GT(at_half[0], at1[0] + 0.1);  // 0.64 vs 0.43
  EXPECT_LT(at_half[4], at1[4]);
}

TEST(SamplerDistribution, TruncatedTokensNeverDrawn) {
  // Default params on a peaked distribution: only min-p's survivors appear.
  std::vector<float> logits(1000, -5.0f);
  logits[10] = 5.0f;
  logits[20] = 4.0f;
  logits[30] = 2.0f;  // p/p_max = e^-3 = 0.0498: just under min_p 0.05
  Sampler s(SamplingParams{});
  std::set<int32_t> seen;
  for (uint64_t pos = 0; pos < 5000; ++pos) {
    std::vector<float> l = logits;
    seen.insert(s.sample(l, {}, pos));
  }
  EXPECT_EQ(seen, (std::set<int32_t>{10, 20}));
}

// ---------------------------------------------------------------- determinism

// A stand-in for a model: logits that depend on the whole history.
std::vector<float> fake_logits(const std::vector<int32_t>& history, size_t vocab) {
  uint32_t h = 2166136261u;
  for (int32_t t : history) h = (h ^ static_cast<uint32_t>(t)) * 16777619u;
  std::vector<float> logits(vocab);
  for (size_t i = 0; i < vocab; ++i) {
    const PhiloxCounter r = philox4x32_10({static_cast<uint32_t>(i), 0, 0, 0}, {h, 17});
    logits[i] = static_cast<float>(r[0] >> 8) * 0x1p-24f * 8.0f;  // [0, 8): a fat head
  }
  return logits;
}

TEST(SamplerDeterminism, SameInputsSameTokenAcrossInstancesAndCalls) {
  SamplingParams p;  // defaults
  p.seed = 5;
  p.repeat_penalty = 1.1f;
  const std::vector<int32_t> history = {3, 1, 4, 1, 5, 9, 2, 6};
  const std::vector<float> logits = fake_logits(history, 3000);
  Sampler a(p), b(p);
  for (uint64_t pos = 8; pos < 200; ++pos) {
    std::vector<float> la = logits, lb = logits, la2 = logits;
    const int32_t ta = a.sample(la, history, pos);
    std::vector<float> other = fake_logits({int32_t(pos)}, 500);  // disturb a's scratch
    (void)a.sample(other, {}, pos);
    EXPECT_EQ(ta, a.sample(la2, history, pos));
    EXPECT_EQ(ta, b.sample(lb, history, pos));
  }
}

TEST(SamplerDeterminism, ContinuationInTwoHalvesEqualsOnePass) {
  SamplingParams p;
  p.seed = 314159;
  p.temperature = 1.2f;
  p.repeat_penalty = 1.3f;
  p.frequency_penalty = 0.2f;
  constexpr size_t kVocab = 4000;
  const std::vector<int32_t> prompt = {11, 22, 33, 44, 55, 66, 77, 88, 99, 111};  // positions 0..9

  auto generate = [&](std::vector<int32_t> seq, size_t until, Sampler& s) {
    while (seq.size() < until) {
      std::vector<float> logits = fake_logits(seq, kVocab);
      seq.push_back(s.sample(logits, seq, seq.size()));
    }
    return seq;
  };
  Sampler one(p);
  const std::vector<int32_t> whole = generate(prompt, 51, one);  // positions 10..50

  Sampler first(p);
  const std::vector<int32_t> half = generate(prompt, 30, first);
  Sampler resumed(p);  // elsewhere, later: a fresh sampler
  const std::vector<int32_t> rest = generate(half, 51, resumed);
  EXPECT_EQ(rest, whole);
  EXPECT_GT(std::set<int32_t>(whole.begin() + 10, whole.end()).size(),
            5u);  // not a degenerate loop
}

// ---------------------------------------------------------------- reference

// The chain written the slow, obvious way (full sort, maps), to check the fast
// paths (top-k bar scan, partial sorts, min-p before top-p) against.
int32_t reference_sample(const SamplingParams& p, std::vector<float> logits,
                         const std::vector<int32_t>& history, uint64_t position) {
  if (p.repeat_last_n != 0) {
    size_t n = history.size();
    if (p.repeat_last_n > 0) n = std::min(n, static_cast<size_t>(p.repeat_last_n));
    std::map<int32_t, int> count;
    for (size_t i = history.size() - n; i < history.size(); ++i) ++count[history[i]];
    for (auto [tok, c] : count) {
      if (tok < 0 || static_cast<size_t>(tok) >= logits.size()) continue;
      float& l = logits[static_cast<size_t>(tok)];
      l = l > 0 ? l / p.repeat_penalty : l * p.repeat_penalty;
      l -= static_cast<float>(c) * p.frequency_penalty + p.presence_penalty;
    }
  }
  std::vector<TokenLogit> c;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > -kInf) c.push_back({logits[i], static_cast<int32_t>(i)});
  }
  std::sort(c.begin(), c.end(), [](const TokenLogit& a, const TokenLogit& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  });
  if (c.empty()) return 0;
  if (p.temperature <= 0) return c[0].id;
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size())
    c.resize(static_cast<size_t>(p.top_k));
  const float top = c[0].logit;
  if (p.top_p < 1.0f) {
    double z = 0, cum = 0;
    for (const TokenLogit& t : c) z += std::exp(t.logit - top);
    for (size_t i = 0; i < c.size(); ++i) {
      cum += std::exp(c[i].logit - top);
      if (cum >= p.top_p * z) {
        c.resize(i + 1);
        break;
      }
    }
  }
  if (p.min_p > 0.0f) {
    const float floor = top + std::log(p.min_p);
    while (c.back().logit < floor) c.pop_back();
  }
  double z = 0;
  for (const TokenLogit& t : c) z += std::exp((t.logit - top) / p.temperature);
  const double target = counter_uniform(p.seed, position) * z;
  double cum = 0;
  for (const TokenLogit& t : c) {
    cum += std::exp((t.logit - top) / p.temperature);
    if (cum > target) return t.id;
  }
  return c.back().id;
}

TEST(SamplerReference, FastPathsMatchTheObviousChain) {
  const size_t vocabs[] = {1, 2, 7, 100, 5000, 40000};
  const int top_ks[] = {0, 1, 5, 40, 300};
  const float top_ps[] = {1.0f, 0.95f, 0.7f, 0.3f};
  const float min_ps[] = {0.0f, 0.05f, 0.2f};
  const float temps[] = {0.0f, 0.7f, 1.0f, 1.5f};
  int cases = 0;
  uint32_t r = 0;
  auto next = [&r](uint32_t salt) { return philox4x32_10({r++, salt, 0, 0}, {99, 1})[0]; };
  for (int trial = 0; trial < 400; ++trial) {
    const size_t vocab = vocabs[next(1) % 6];
    SamplingParams p;
    p.top_k = top_ks[next(2) % 5];
    p.top_p = top_ps[next(3) % 4];
    p.min_p = min_ps[next(4) % 3];
    p.temperature = temps[next(5) % 4];
    p.repeat_penalty = (next(6) % 2) ? 1.0f : 1.3f;
    p.frequency_penalty = (next(7) % 2) ? 0.0f : 0.4f;
    p.presence_penalty = (next(8) % 2) ? 0.0f : -0.3f;
    p.repeat_last_n = (next(9) % 2) ? 64 : -1;
    p.seed = next(10);
    ASSERT_TRUE(p.validate().ok()) << p.validate().message();
    // A third of the cases use coarse integer logits, full of ties.
    const bool coarse = next(11) % 3 == 0;
    std::vector<float> logits(vocab);
    for (float& l : logits) {
      const uint32_t v = next(12);
      l = coarse ? static_cast<float>(v % 6) : static_cast<float>(v >> 8) * 0x1p-24f * 12.0f - 6.0f;
      if (v % 97 == 0) l = -kInf;
    }
    std::vector<int32_t> history;
    for (int i = 0; i < 80; ++i) history.push_back(static_cast<int32_t>(next(13) % vocab));
    Sampler s(p);
    for (uint64_t pos : {0ull, 1ull, 12345ull}) {
      std::vector<float> l = logits;
      ASSERT_EQ(s.sample(l, history, pos), reference_sample(p, logits, history, pos))
          << "trial " << trial << " vocab " << vocab << " top_k " << p.top_k << " top_p " << p.top_p
          << " min_p " << p.min_p << " temp " << p.temperature << " pos " << pos;
      ++cases;
    }
  }
  EXPECT_EQ(cases, 1200);
}

// ---------------------------------------------------------------- validate

void expect_rejected(const SamplingParams& p, const std::string& field) {
  const Status s = p.validate();
  EXPECT_FALSE(s.ok()) << field;
  EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
}

TEST(SamplerParams, DefaultsAndEdgesAreValid) {
  EXPECT_TRUE(SamplingParams{}.validate().ok());
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.repeat_last_n = -1;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  EXPECT_TRUE(p.validate().ok()) << p.validate().message();
  p.min_p = 0.0f;
  p.repeat_last_n = 0;
  EXPECT_TRUE(p.validate().ok()) << p.validate().message();
}

TEST(SamplerParams, RejectsEachBadValueNamingTheField) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto with = [](auto set) {
    SamplingParams p;
    set(p);
    return p;
  };
  for (float v : {-0.1f, -kInf, kInf, nan}) {
    expect_rejected(with([&](SamplingParams& p) { p.temperature = v; }), "temperature");
  }
  expect_rejected(with([](SamplingParams& p) { p.top_k = -1; }), "top_k");
  for (float v : {0.0f, -0.5f, 1.01f, nan}) {
    expect_rejected(with([&](SamplingParams& p) { p.top_p = v; }), "top_p");
  }
  for (float v : {-0.01f, 1.01f, nan}) {
    expect_rejected(with([&](SamplingParams& p) { p.min_p = v; }), "min_p");
  }
  for (float v : {0.0f, -1.0f, kInf, nan}) {
    expect_rejected(with([&](SamplingParams& p) { p.repeat_penalty = v; }), "repeat_penalty");
  }
  expect_rejected(with([](SamplingParams& p) { p.repeat_last_n = -2; }), "repeat_last_n");
  for (float v : {-2.01f, 2.01f, nan}) {
    expect_rejected(with([&](SamplingParams& p) { p.presence_penalty = v; }), "presence_penalty");
    expect_rejected(with([&](SamplingParams& p) { p.frequency_penalty = v; }), "frequency_penalty");
  }
}

}  // namespace
}  // namespace th
