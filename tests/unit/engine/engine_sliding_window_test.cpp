// A model whose every layer has a sliding window (the tiny synthetic Gemma 3: two local layers,
// window 5; and a tiny Mistral, whose window is on every layer by definition): the KV cache releases the blocks behind the window as sequences grow, so one
// sequence outgrows the whole primary pool, and batched serving with preemption (recompute and
// swaps, whose tables then have released blocks in them) still gives each request's tokens
// exactly as Generator gives them alone (its cache keeps every block).
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine_harness.h"

namespace th {
namespace {

using test::Collected;
using test::LoadedModel;

std::string tiny_swa_path(Arch arch) {
  SyntheticSpec spec;
  spec.shape = {"tiny", 64, 2, 4, 2, 96, 256};
  spec.arch = arch;
  if (arch == Arch::Llama) spec.sliding_window = 5;  // mistral
  spec.type = DType::F32;
  spec.seed = 5;
  Result<GgufFile> vocab = GgufFile::open(test::shared_path("testdata/tokenizer/llamacpp/ggml-vocab-llama-spm.gguf"));
  EXPECT_TRUE(vocab.ok()) << vocab.message();
  const std::string p = ::testing::TempDir() + "/th_engine_swa_" + std::string(arch_spec(arch).name) + "_" +
                        std::to_string(::getpid()) + ".gguf";
  Status s = write_synthetic_model(spec, *vocab, p);
  EXPECT_TRUE(s.ok()) << s.message();
  return p;
}

std::string tiny_gemma3_path() {
  static const std::string path = tiny_swa_path(Arch::Gemma3);
  return path;
}

EngineConfig pool(const LoadedModel& l, int64_t primary, int64_t host) {
  EngineConfig c;
  c.kv.block_size = 4;
  c.kv.primary_blocks = primary;
  c.kv.host_blocks = host;
  c.token_budget = 16;
  c.max_seqs = 4;
  c.end_of_generation = end_of_generation_ids(*l.tok);
  c.check_invariants = true;
  return c;
}

std::vector<GenerateRequest> requests(int32_t n_vocab, int n, uint64_t seed, int max_prompt = 20) {
  std::mt19937_64 rng(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<GenerateRequest> out;
  for (int i = 0; i < n; ++i) {
    GenerateRequest r;
    r.prompt = {1};
    for (int j = uni(4, max_prompt); j > 0; --j) r.prompt.push_back(uni(3, n_vocab - 1));
    r.max_tokens = uni(30, 44);
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    out.push_back(r);
  }
  return out;
}

// Serves the requests, all submitted at once; `peak_used` gets the most primary blocks in use
// after any step.
std::vector<Collected> serve(const LoadedModel& l, EngineConfig c, const std::vector<GenerateRequest>& rs,
                             int64_t* peak_used, EngineStats* stats) {
  auto eng = Engine::create(*l.model, *l.backend, std::move(c));
  EXPECT_TRUE(eng.ok()) << eng.message();
  std::vector<Collected> out(rs.size());
  if (!eng.ok()) return out;
  Engine& e = **eng;
  std::vector<std::optional<RequestStream>> streams;
  for (const GenerateRequest& r : rs) {
    auto s = e.submit(r);
    EXPECT_TRUE(s.ok()) << s.message();
    if (s.ok()) streams.emplace_back(std::move(s).value());
  }
  *peak_used = 0;
  for (int step = 0; step < 10000 && e.has_work(); ++step) {
    Status st = e.step();
    EXPECT_TRUE(st.ok()) << st.message();
    if (!st.ok()) break;
    *peak_used = std::max(*peak_used, e.stats().kv.primary_used);
    for (size_t i = 0; i < streams.size(); ++i)
      if (streams[i]) test::collect(*streams[i], out[i]);
  }
  *stats = e.stats();
  return out;
}

class EngineSlidingWindow : public ::testing::Test {
 protected:
  void SetUp() override {
    l_ = test::load_model(tiny_gemma3_path());
    ASSERT_TRUE(l_.model && l_.tok);
    ASSERT_EQ(l_.model->config().sliding_window, 5);
    for (int64_t i = 0; i < l_.model->config().n_layer; ++i) ASSERT_TRUE(l_.model->config().is_swa(i));
  }
  LoadedModel l_;
};

// 6 blocks of 4 positions: 24 positions, and the request takes 35 to 52. A query sees 5
// positions, so after a step a sequence holds the blocks of its last 4 positions: 2 blocks,
// 3 with the one its prompt (at most 8 tokens) was computed in.
void outgrows_the_pool(const LoadedModel& l_) {
  EngineConfig c = pool(l_, 6, 0);
  c.kv.prefix_caching = false;  // released blocks go back to the free list, not the cache
  const std::vector<GenerateRequest> rs = requests(l_.model->config().n_vocab, 1, 3, 7);
  int64_t peak = 0;
  EngineStats stats;
  const std::vector<Collected> got = serve(l_, c, rs, &peak, &stats);
  ASSERT_TRUE(got[0].finish);
  EXPECT_EQ(*got[0].finish, FinishReason::Length) << got[0].error;
  EXPECT_EQ(got[0].tokens, test::run_alone(l_, rs[0], 128));
  EXPECT_GT(static_cast<int64_t>(rs[0].prompt.size() + got[0].tokens.size()), 6 * 4);
  EXPECT_LE(peak, 3);
  EXPECT_EQ(stats.kv.primary_used, 0);
}

TEST_F(EngineSlidingWindow, OneSequenceOutgrowsThePool) { outgrows_the_pool(l_); }

TEST(EngineSlidingWindowMistral, OneSequenceOutgrowsThePool) {
  const std::string path = tiny_swa_path(Arch::Llama);
  LoadedModel l = test::load_model(path);
  ASSERT_TRUE(l.model && l.tok);
  ASSERT_EQ(l.model->config().sliding_window, 5);
  outgrows_the_pool(l);
  std::remove(path.c_str());
}

TEST_F(EngineSlidingWindow, BatchedWithPreemptionEqualsEachAlone) {
  const std::vector<GenerateRequest> rs = requests(l_.model->config().n_vocab, 5, 7);
  std::vector<std::vector<int32_t>> alone;
  for (const GenerateRequest& r : rs) alone.push_back(test::run_alone(l_, r, 128));
  for (int64_t host : {0, 12}) {  // recompute only; swaps too
    int64_t peak = 0;
    EngineStats stats;
    const std::vector<Collected> got = serve(l_, pool(l_, 7, host), rs, &peak, &stats);
    for (size_t i = 0; i < rs.size(); ++i) {
      ASSERT_TRUE(got[i].finish) << "request " << i;
      EXPECT_EQ(got[i].tokens, alone[i]) << "request " << i << ", host " << host;
    }
    EXPECT_GT(stats.preempted_swap + stats.preempted_recompute, 0) << "host " << host;
    if (host > 0) {
      EXPECT_GT(stats.preempted_swap, 0);
    }
    EXPECT_EQ(stats.kv.primary_used, 0);
  }
}

}  // namespace
}  // namespace th
