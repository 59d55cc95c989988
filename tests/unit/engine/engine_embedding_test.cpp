// Embedding requests (Pooling) through the engine: the pooled final hidden states equal a
// direct forward pass over the prompt, and inputs batched with each other and with
// generations (chunked, out of the prefix cache, preempted) equal each input alone.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine_harness.h"

namespace th {
namespace {

using test::LoadedModel;

// The reference: the whole prompt in one forward pass, every token's hidden state asked for,
// pooled here.
std::vector<float> direct(const LoadedModel& l, const std::vector<int32_t>& prompt, Pooling pooling) {
  const ModelConfig& c = l.model->config();
  const int64_t n = static_cast<int64_t>(prompt.size());
  auto kv = KvCache::create(*l.backend, c.n_layer, c.kv_dim(), (n + 15) / 16, 16);
  EXPECT_TRUE(kv.ok()) << kv.message();
  std::vector<int32_t> table;
  EXPECT_TRUE(kv->reserve(table, n));
  ForwardBatch b;
  b.tables = {table};
  for (int64_t p = 0; p < n; ++p) {
    b.add(prompt[static_cast<size_t>(p)], 0, static_cast<int32_t>(p), false);
    b.want_hidden.push_back(1);
  }
  std::vector<float> logits, hidden;
  Status s = l.model->forward(b, *kv, &logits, &hidden);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(logits.empty());
  const size_t d = static_cast<size_t>(c.n_embd);
  std::vector<float> out(d, 0.0f);
  if (pooling == Pooling::Last) {
    std::copy(hidden.end() - static_cast<long>(d), hidden.end(), out.begin());
    return out;
  }
  for (size_t j = 0; j < d; ++j) {
    double sum = 0;
    for (int64_t p = 0; p < n; ++p) sum += hidden[static_cast<size_t>(p) * d + j];
    out[j] = static_cast<float>(sum / static_cast<double>(n));
  }
  return out;
}

EngineConfig config(const LoadedModel& l, int64_t blocks, int64_t budget) {
  EngineConfig c;
  c.kv.block_size = 8;
  c.kv.primary_blocks = blocks;
  c.token_budget = budget;
  c.max_seqs = 8;
  c.end_of_generation = end_of_generation_ids(*l.tok);
  c.check_invariants = true;
  return c;
}

// Runs `requests` together (all submitted before the first step) and returns each final event.
std::vector<TokenEvent> run_together(const LoadedModel& l, EngineConfig cfg, const std::vector<GenerateRequest>& requests) {
  auto eng = Engine::create(*l.model, *l.backend, std::move(cfg));
  EXPECT_TRUE(eng.ok()) << eng.message();
  std::vector<RequestStream> streams;
  for (const GenerateRequest& r : requests) {
    auto s = (*eng)->submit(r);
    EXPECT_TRUE(s.ok()) << s.message();
    streams.push_back(std::move(*s));
  }
  for (int i = 0; i < 10000 && (*eng)->has_work(); ++i) {
    Status st = (*eng)->step();
    EXPECT_TRUE(st.ok()) << st.message();
  }
  std::vector<TokenEvent> last(requests.size());
  for (size_t i = 0; i < streams.size(); ++i)
    for (TokenEvent& e : streams[i].drain()) last[i] = std::move(e);
  return last;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t j = 0; j < got.size(); ++j) ASSERT_NEAR(got[j], want[j], tol) << "element " << j;
}

TEST(EngineEmbedding, BatchedEqualsAloneEqualsADirectPass) {
  LoadedModel l = test::load_model(test::stories_path());
  ASSERT_TRUE(l.model);
  std::mt19937 rng(5);
  std::vector<GenerateRequest> requests;
  std::vector<int32_t> shared;
  for (int i = 0; i < 24; ++i) shared.push_back(static_cast<int32_t>(rng() % 500 + 3));
  for (int i = 0; i < 8; ++i) {
    GenerateRequest r;
    r.prompt = {1};
    if (i % 2 == 0) r.prompt.insert(r.prompt.end(), shared.begin(), shared.end());  // prefix-cache material
    for (int j = 0, n = static_cast<int>(rng() % 30); j < n; ++j) r.prompt.push_back(static_cast<int32_t>(rng() % 500 + 3));
    r.pooling = i % 3 == 2 ? Pooling::Last : Pooling::Mean;
    r.sampling.temperature = 0;
    requests.push_back(r);
  }
  // Generations sharing the prefix, interleaved, so the batch mixes both kinds.
  std::vector<GenerateRequest> mixed;
  for (size_t i = 0; i < requests.size(); ++i) {
    mixed.push_back(requests[i]);
    GenerateRequest g = requests[i];
    g.pooling = Pooling::None;
    g.max_tokens = 5;
    g.ignore_eos = true;
    mixed.push_back(g);
  }
  // A roomy pool in steps of 16 tokens (chunked prompts), and a pool small enough to preempt.
  for (auto [blocks, budget] : {std::pair<int64_t, int64_t>{64, 16}, {12, 24}}) {
    SCOPED_TRACE(blocks);
    const std::vector<TokenEvent> together = run_together(l, config(l, blocks, budget), mixed);
    for (size_t i = 0; i < requests.size(); ++i) {
      SCOPED_TRACE(i);
      const TokenEvent& e = together[2 * i];
      ASSERT_TRUE(e.finish.has_value());
      EXPECT_EQ(*e.finish, FinishReason::Stop);
      EXPECT_EQ(e.token, -1);
      const std::vector<TokenEvent> alone = run_together(l, config(l, 64, 512), {requests[i]});
      expect_near(e.embedding, alone[0].embedding, 1e-5f);
      expect_near(alone[0].embedding, direct(l, requests[i].prompt, requests[i].pooling), 1e-5f);
      EXPECT_EQ(together[2 * i + 1].finish, FinishReason::Length);  // the generation ran too
    }
  }
}

// How many tokens a request generates before its end, run alone.
int64_t generated(const LoadedModel& l, EngineConfig cfg, const GenerateRequest& r, FinishReason* why) {
  auto eng = Engine::create(*l.model, *l.backend, std::move(cfg));
  EXPECT_TRUE(eng.ok()) << eng.message();
  auto s = (*eng)->submit(r);
  EXPECT_TRUE(s.ok()) << s.message();
  for (int i = 0; i < 1000 && (*eng)->has_work(); ++i) EXPECT_TRUE((*eng)->step().ok());
  int64_t n = 0;
  for (const TokenEvent& e : s->drain()) {
    n += e.token >= 0;
    if (e.finish) *why = *e.finish;
  }
  return n;
}

TEST(EngineMinTokens, EndAndStopTokensAreMaskedUntilThen) {
  LoadedModel l = test::load_model(test::stories_path());
  ASSERT_TRUE(l.model);
  GenerateRequest r;
  r.prompt = {1, 400, 500};
  r.sampling.temperature = 0;
  r.max_tokens = 12;
  FinishReason why{};
  // The greedy first token, made an end-of-generation token: without min_tokens nothing is generated.
  EngineConfig cfg = config(l, 64, 64);
  auto probe = Engine::create(*l.model, *l.backend, cfg);
  auto ps = (*probe)->submit(r);
  while ((*probe)->has_work()) ASSERT_TRUE((*probe)->step().ok());
  const int32_t first = ps->drain().front().token;
  ASSERT_GE(first, 0);
  cfg.end_of_generation = {first};
  EXPECT_EQ(generated(l, cfg, r, &why), 0);
  EXPECT_EQ(why, FinishReason::Stop);
  r.min_tokens = 5;
  EXPECT_GE(generated(l, cfg, r, &why), 5);
  // The same with it as a stop token id (which ends a request even with ignore_eos).
  cfg.end_of_generation = {};
  r.min_tokens = 0;
  r.ignore_eos = true;
  r.stop_token_ids = {first};
  EXPECT_EQ(generated(l, cfg, r, &why), 0);
  r.min_tokens = 4;
  EXPECT_GE(generated(l, cfg, r, &why), 4);
  // min_tokens above max_tokens is refused.
  r.min_tokens = 13;
  EXPECT_FALSE((*probe)->submit(r).ok());
}

}  // namespace
}  // namespace th
