// Thousands of arrivals, cancellations, preemptions and completions against a
// small KV pool. After every step the engine recounts the KV cache's references
// (check_invariants: nothing leaked, nothing owned twice); at the end every
// accepted request has finished or been cancelled, nothing is left allocated,
// and a sample of the completed greedy requests equals the same request alone.
// The host tier is on with its prefix cache and the copy thread's prefetch:
// evicted prefixes are demoted and promoted, swapped sequences prefetched.
#include <gtest/gtest.h>

#include <random>

#include "engine/engine.h"
#include "engine_harness.h"

namespace th {
namespace {

struct Tracked {
  GenerateRequest request;
  std::optional<RequestStream> stream;
  test::Collected got;
  bool cancelled = false;
};

// `arrivals` requests of random shapes; `slo`: SLO step sizing on (targets per class).
void churn(int arrivals, const SloConfig& slo) {
  test::LoadedModel l = test::load_model(test::stories_path());
  ASSERT_TRUE(l.model && l.tok);
  EngineConfig c;
  c.slo = slo;
  c.kv.block_size = 4;
  c.kv.primary_blocks = 24;  // 96 positions: a handful of sequences at once
  c.kv.host_blocks = 12;
  c.kv.host_prefix_cache = true;  // the defaults, said here: the test must cover them
  c.kv.prefetch = true;
  c.token_budget = 32;
  c.max_seqs = 6;
  c.end_of_generation = end_of_generation_ids(*l.tok);
  c.check_invariants = true;
  auto made = Engine::create(*l.model, *l.backend, c);
  ASSERT_TRUE(made.ok()) << made.message();
  Engine& e = **made;
  ASSERT_EQ(e.max_model_len(), 96);

  std::mt19937_64 rng(2024);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int32_t n_vocab = l.model->config().n_vocab;
  std::vector<std::vector<int32_t>> prefixes(4);
  for (auto& p : prefixes)
    for (int i = 0; i < 12; ++i) p.push_back(uni(3, n_vocab - 1));

  const int kArrivals = arrivals;
  const bool sized = slo.tpot.any();
  int64_t smallest_budget = c.token_budget, smallest_cap = c.max_seqs;
  std::vector<Tracked> reqs;
  reqs.reserve(kArrivals);
  int submitted = 0, rejected = 0, steps = 0;
  while (submitted < kArrivals || e.has_work()) {
    ASSERT_LT(steps, 10 * kArrivals) << "no end in sight: " << e.stats().running << " running, " << e.stats().waiting
                            << " waiting, " << e.stats().swapped << " swapped";
    for (int k = uni(0, 3); k > 0 && submitted < kArrivals; --k, ++submitted) {
      Tracked t;
      GenerateRequest& r = t.request;
      r.prompt = {1};
      if (uni(0, 1)) {
        const std::vector<int32_t>& p = prefixes[static_cast<size_t>(uni(0, 3))];
        r.prompt.insert(r.prompt.end(), p.begin(), p.end());
      }
      // One in fifty can never fit (longer than a sequence's whole share of the pool).
      const int len = uni(0, 49) == 0 ? uni(96, 140) : uni(0, 24);
      for (int i = 0; i < len; ++i) r.prompt.push_back(uni(3, n_vocab - 1));
      r.max_tokens = uni(1, 8);
      r.ignore_eos = uni(0, 1);
      r.priority = uni(-2, 2);
      r.tenant.assign(1, uni(0, 2) == 0 ? 'b' : 'a');  // (a string literal here trips GCC 12 -Wrestrict)
      if (uni(0, 1)) {
        r.sampling.temperature = 0.7f;
        r.sampling.seed = rng();
      } else {
        r.sampling.temperature = 0;
      }
      if (uni(0, 30) == 0) r.deadline = Engine::Clock::now() + std::chrono::milliseconds(uni(0, 20));
      auto s = e.submit(r);
      if (static_cast<int64_t>(r.prompt.size()) >= e.max_model_len()) {
        EXPECT_FALSE(s.ok());
        ++rejected;
        continue;
      }
      ASSERT_TRUE(s.ok()) << s.message();
      t.stream.emplace(std::move(s).value());
      reqs.push_back(std::move(t));
    }
    // Cancel a few live ones: explicitly, or by dropping the stream.
    for (int k = uni(0, 2); k > 0 && !reqs.empty(); --k) {
      Tracked& t = reqs[static_cast<size_t>(uni(std::max(0, static_cast<int>(reqs.size()) - 40),
                                               static_cast<int>(reqs.size()) - 1))];
      if (!t.stream || t.got.finish || uni(0, 3) != 0) continue;
      t.cancelled = true;
      if (uni(0, 1)) t.stream->cancel();
      else t.stream.reset();
    }
    Status st = e.step();
    ASSERT_TRUE(st.ok()) << "step " << steps << ": " << st.message();
    ++steps;
    const EngineStats es = e.stats();
    ASSERT_LE(es.running, c.max_seqs);
    smallest_budget = std::min(smallest_budget, es.slo.token_budget);
    smallest_cap = std::min(smallest_cap, es.slo.max_seqs);
    for (Tracked& t : reqs)
      if (t.stream) test::collect(*t.stream, t.got);
  }

  const EngineStats es = e.stats();
  EXPECT_EQ(es.running + es.waiting + es.swapped, 0);
  EXPECT_EQ(es.kv.primary_used, 0);
  EXPECT_EQ(es.kv.host_used, 0);
  EXPECT_EQ(es.rejected, rejected);
  const int scale = kArrivals / 100;  // the counts below are for 2000 arrivals: 20 per 100
  EXPECT_GT(rejected, scale / 2);
  if (sized) {  // which preemption the pool picks follows the measured step times here
    EXPECT_GT(es.preempted_swap + es.preempted_recompute, 0);
  } else {
    EXPECT_GT(es.preempted_swap, scale);
    EXPECT_GT(es.preempted_recompute, scale);
  }
  EXPECT_GT(es.kv.prefix_hit_tokens, 0);
  if (sized) {  // the targets did size steps below the static limits
    EXPECT_GT(es.slo.sized_steps, steps / 4);
    EXPECT_LT(smallest_budget, c.token_budget);
    EXPECT_LT(smallest_cap, c.max_seqs);
    EXPECT_FALSE(es.slo.classes.empty());
  } else {  // the host tier as a prefix cache and the swap-in prefetch did run
    EXPECT_GT(es.kv.demoted_blocks, 0);
    EXPECT_GT(es.kv.promoted_blocks, 0);
    EXPECT_GT(es.kv.prefix_host_hit_tokens, 0);
    EXPECT_GT(es.kv.prefetched_blocks, 0);
  }
  int finished = 0, cancelled = 0, checked = 0;
  for (Tracked& t : reqs) {
    if (!t.stream) continue;  // dropped: nobody to tell
    ASSERT_TRUE(t.got.finish) << "a request never finished";
    ASSERT_NE(*t.got.finish, FinishReason::Error) << t.got.error;
    if (*t.got.finish == FinishReason::Cancelled) {
      EXPECT_TRUE(t.cancelled);
      ++cancelled;
      continue;
    }
    ++finished;
    if (*t.got.finish == FinishReason::Deadline) continue;
    EXPECT_LE(static_cast<int64_t>(t.got.tokens.size()), t.request.max_tokens);
    if (finished % 40 == 0) {
      EXPECT_EQ(t.got.tokens, test::run_alone(l, t.request, e.max_model_len()));
      ++checked;
    }
  }
  EXPECT_GT(finished, kArrivals / 2);
  EXPECT_GT(cancelled, scale);
  EXPECT_GT(checked, scale / 2);
  EXPECT_EQ(es.finished, static_cast<int64_t>(reqs.size()));
  std::printf("%d arrivals (%d rejected), %d steps (%lld sized), %d finished, %lld cancelled, %lld swaps, %lld "
              "recomputes, prefix hits %.1f%% (host tier %.1f%%), %lld blocks demoted, %lld promoted, %lld of %lld "
              "swapped in prefetched (%lld wasted)\n",
              kArrivals, rejected, steps, static_cast<long long>(es.slo.sized_steps), finished,
              static_cast<long long>(es.cancelled), static_cast<long long>(es.preempted_swap),
              static_cast<long long>(es.preempted_recompute), 100 * es.prefix_hit_rate(),
              es.kv.prefix_query_tokens ? 100.0 * static_cast<double>(es.kv.prefix_host_hit_tokens) /
                                              static_cast<double>(es.kv.prefix_query_tokens)
                                        : 0.0,
              static_cast<long long>(es.kv.demoted_blocks), static_cast<long long>(es.kv.promoted_blocks),
              static_cast<long long>(es.kv.prefetched_blocks), static_cast<long long>(es.kv.swapped_in_blocks),
              static_cast<long long>(es.kv.prefetch_wasted_blocks));
}

TEST(EngineRandomized, ChurnNeverLeaksDeadlocksOrLosesARequest) { churn(2000, SloConfig{}); }

// The SLO path: high-priority requests with a TPOT target no step can meet (so while one is live
// every step is sized to the decodes plus one prompt token, and admission stops), the others
// with one every step meets; the same invariants after every step and the same greedy outputs.
TEST(EngineRandomized, SloSizedStepsKeepTheInvariantsAndTheOutputs) {
  SloConfig slo;
  Result<SloClassTargets> tpot = parse_slo_targets("-2=0.001,high=0.001,normal=60000,low=60000,2=60000", "tpot");
  ASSERT_TRUE(tpot.ok()) << tpot.message();
  slo.tpot = *tpot;
  slo.ttft.all = 60.0;
  churn(300, slo);
}

}  // namespace
}  // namespace th
