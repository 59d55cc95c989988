#include "engine/sampler.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "engine/philox.h"

namespace th {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kMaxFinite = std::numeric_limits<float>::max();

// The one order every step ranks by: higher logit first, lower id on ties. It
// is total, so which tokens survive a cut and the order the draw walks depend
// on the values alone, never on how a sort or selection happened to run.
// (A lambda rather than a function, so the sorts inline it.)
constexpr auto ranks_before = [](const TokenLogit& a, const TokenLogit& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
};

// Calls visit(i) for each i, in order, with x[i] > bar, where visit may raise
// bar as it goes. Both whole-vocabulary scans are this loop with a bar that
// soon turns almost everything away, so it tests a block of logits at once
// with a branch-free comparison the compiler vectorises, and goes one by one
// only through the rare block that holds a contender.
template <class Visit>
void for_each_above(std::span<const float> x, const float& bar, Visit visit) {
  constexpr size_t kBlock = 32;
  const size_t n = x.size();
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    const float b = bar;
    int any = 0;
    for (size_t j = 0; j < kBlock; ++j) any |= x[i + j] > b;
    if (!any) continue;
    for (size_t j = i; j < i + kBlock; ++j) {
      if (x[j] > bar) visit(j);
    }
  }
  for (; i < n; ++i) {
    if (x[i] > bar) visit(i);
  }
}

// Strict `>` keeps the lowest id among ties, and NaN never wins; if nothing
// beats -inf the answer is 0, a valid token for any non-empty vocab.
int32_t argmax(std::span<const float> logits) {
  size_t best = 0;
  float best_logit = -kInf;
  for_each_above(logits, best_logit, [&](size_t i) {
    best_logit = logits[i];
    best = i;
  });
  return static_cast<int32_t>(best);
}

// Hands out candidates in ranks_before order, sorting only as far as asked:
// top-p and the draw usually stop within the first few dozen tokens, so a
// whole-vocabulary tail need not be sorted.
class RankedView {
 public:
  RankedView(TokenLogit* data, size_t size) : data_(data), size_(size) {}

  const TokenLogit& operator[](size_t i) {
    assert(i < size_);
    while (i >= sorted_) extend();
    return data_[i];
  }

 private:
  void extend() {
    const size_t end = std::min(size_, sorted_ + chunk_);
    if (end < size_) std::nth_element(data_ + sorted_, data_ + end, data_ + size_, ranks_before);
    std::sort(data_ + sorted_, data_ + end, ranks_before);
    sorted_ = end;
    chunk_ *= 4;  // geometric growth bounds the worst case at O(n log n), like one full sort
  }

  TokenLogit* data_;
  size_t size_;
  size_t sorted_ = 0;
  size_t chunk_ = 64;
};

}  // namespace

Status SamplingParams::validate() const {
  if (!std::isfinite(temperature) || temperature < 0.0f) {
    return Status::errorf("temperature must be finite and >= 0 (0: greedy), got ", temperature);
  }
  if (top_k < 0) return Status::errorf("top_k must be >= 0 (0: off), got ", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return Status::errorf("top_p must be in (0, 1] (1: off), got ", top_p);
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    return Status::errorf("min_p must be in [0, 1] (0: off), got ", min_p);
  }
  if (!std::isfinite(repeat_penalty) || !(repeat_penalty > 0.0f)) {
    return Status::errorf("repeat_penalty must be finite and > 0 (1: off), got ", repeat_penalty);
  }
  if (repeat_last_n < -1) {
    return Status::errorf("repeat_last_n must be >= -1 (-1: all, 0: off), got ", repeat_last_n);
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return Status::errorf("presence_penalty must be in [-2, 2], got ", presence_penalty);
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return Status::errorf("frequency_penalty must be in [-2, 2], got ", frequency_penalty);
  }
  return ok_status();
}

float counter_uniform(uint64_t seed, uint64_t position) {
  // Low words first, for both key and counter, as Random123's word order has it.
  const PhiloxCounter out = philox4x32_10(
      {static_cast<uint32_t>(position), static_cast<uint32_t>(position >> 32), 0u, 0u},
      {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  // 24 bits fill a float's significand exactly, so the product is exact and
  // the largest value is 1 - 2^-24: never 1, which the inverse CDF relies on.
  return static_cast<float>(out[0] >> 8) * 0x1p-24f;
}

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> history) {
  const float rp = p_.repeat_penalty;
  const float fp = p_.frequency_penalty;
  const float pp = p_.presence_penalty;
  if (p_.repeat_last_n == 0 || (rp == 1.0f && fp == 0.0f && pp == 0.0f)) return;

  size_t n = history.size();
  if (p_.repeat_last_n > 0) n = std::min(n, static_cast<size_t>(p_.repeat_last_n));
  // Sorting the window counts repeats without a vocabulary-sized table to clear per call.
  window_.assign(history.end() - static_cast<std::ptrdiff_t>(n), history.end());
  std::sort(window_.begin(), window_.end());
  for (size_t i = 0; i < window_.size();) {
    const int32_t tok = window_[i];
    size_t j = i;
    while (j < window_.size() && window_[j] == tok) ++j;
    const float count = static_cast<float>(j - i);
    i = j;
    if (tok < 0 || static_cast<size_t>(tok) >= logits.size()) continue;  // not in this vocab
    float& l = logits[static_cast<size_t>(tok)];
    // CTRL divides; multiplying a negative logit instead keeps the penalty a
    // penalty (dividing would raise it toward 0). Same as llama.cpp.
    l = l > 0.0f ? l / rp : l * rp;
    l -= count * fp + pp;
  }
}

void Sampler::collect_candidates(std::span<const float> logits) {
  const size_t n = logits.size();
  const size_t k = p_.top_k > 0 ? static_cast<size_t>(p_.top_k) : n;
  cand_.clear();
  // -inf (and NaN, which fails every comparison) can never be drawn, so such
  // tokens are left out; +inf is clamped so that logit - max stays a number.
  if (k >= n) {
    cand_.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (logits[i] > -kInf)
        cand_.push_back({std::min(logits[i], kMaxFinite), static_cast<int32_t>(i)});
    }
    return;
  }
  // A buffer of up to 2k contenders, cut back to the best k whenever it fills;
  // the k-th best logit then turns most of the vocabulary away with a single
  // comparison each. A token equal to the bar loses too: ids only grow along
  // the scan, so it ranks after the k-th best, which has a lower id.
  const size_t cap = 2 * k + 64;
  cand_.reserve(cap);
  auto cut_to_k = [this, k] {
    const auto kth = cand_.begin() + static_cast<std::ptrdiff_t>(k - 1);
    std::nth_element(cand_.begin(), kth, cand_.end(), ranks_before);
    cand_.resize(k);
  };
  float bar = -kInf;
  for_each_above(logits, bar, [&](size_t i) {
    cand_.push_back({std::min(logits[i], kMaxFinite), static_cast<int32_t>(i)});
    if (cand_.size() == cap) {
      cut_to_k();
      bar = cand_[k - 1].logit;
    }
  });
  if (cand_.size() > k) cut_to_k();
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history,
                        uint64_t position) {
  if (logits.empty()) return -1;
  apply_penalties(logits, history);
  if (p_.greedy()) return argmax(logits);

  collect_candidates(logits);  // top-k
  if (cand_.empty()) return argmax(logits);

  float top = -kInf;
  for (const TokenLogit& c : cand_) top = std::max(top, c.logit);
  // Probabilities at temperature 1: top-p and min-p run before temperature in
  // llama.cpp's chain, so they judge the untempered distribution.
  auto weight1 = [top](float l) { return static_cast<double>(std::exp(l - top)); };

  // top-p's mass is relative to everything top-k kept, so its normaliser is
  // taken before min-p prunes. Both cuts keep a prefix of the ranked order, so
  // applying min-p first and then walking top-p over the rest gives the same
  // set as the chain's order, while sorting only min-p's survivors.
  const bool use_top_p = p_.top_p < 1.0f;
  double z1 = 0.0;
  if (use_top_p) {
    for (const TokenLogit& c : cand_) z1 += weight1(c.logit);
  }
  size_t kept = cand_.size();
  if (p_.min_p > 0.0f) {
    // p_i >= min_p * p_max  <=>  logit_i >= max_logit + log(min_p). Capping
    // min_p at 1 keeps the top token even for params that skipped validate().
    const float floor = top + std::log(std::min(p_.min_p, 1.0f));
    const auto end = std::partition(cand_.begin(), cand_.end(),
                                    [floor](const TokenLogit& c) { return c.logit >= floor; });
    kept = static_cast<size_t>(end - cand_.begin());
  }
  RankedView ranked(cand_.data(), kept);
  if (use_top_p) {
    const double target = static_cast<double>(p_.top_p) * z1;
    double cum = 0.0;
    for (size_t i = 0; i < kept; ++i) {
      cum += weight1(ranked[i].logit);
      if (cum >= target) {
        kept = i + 1;
        break;
      }
    }
  }

  // Temperature, then the draw: inverse CDF over the ranked survivors.
  const float t = p_.temperature;
  auto weight_t = [top, t](float l) { return static_cast<double>(std::exp((l - top) / t)); };
  double zt = 0.0;
  for (size_t i = 0; i < kept; ++i) zt += weight_t(cand_[i].logit);  // the same set, in any order
  const double target = static_cast<double>(counter_uniform(p_.seed, position)) * zt;
  double cum = 0.0;
  int32_t last = ranked[0].id;
  for (size_t i = 0; i < kept; ++i) {
    const TokenLogit& c = ranked[i];
    const double w = weight_t(c.logit);
    if (w > 0.0) last = c.id;
    cum += w;
    if (cum > target) return c.id;
  }
  // Only rounding (zt summed in another order than cum) can get here; the
  // last token with weight is where an exact walk would have ended.
  return last;
}

}  // namespace th
