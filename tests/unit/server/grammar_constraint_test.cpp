// A grammar-constrained request through the real engine on stories260K: every output
// follows the grammar (checked by nlohmann's JSON parser, independent of ours), the mask
// never leaves the sampler nothing, and a constrained greedy request gives the same tokens
// alone as inside a batch of other requests.
#include "server/grammar_constraint.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "unit/engine/engine_harness.h"

namespace th::server {
namespace {

class GrammarConstraintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    l_ = test::load_model(test::stories_path());
    ASSERT_TRUE(l_.model && l_.tok);
    vocab_ = make_grammar_vocab(*l_.tok);
  }
  std::unique_ptr<Engine> engine() {
    EngineConfig c;
    c.end_of_generation = end_of_generation_ids(*l_.tok);
    c.kv.primary_blocks = 256;
    c.kv.block_size = 16;
    auto e = Engine::create(*l_.model, *l_.backend, std::move(c));
    EXPECT_TRUE(e.ok()) << e.message();
    return std::move(e).value();
  }
  std::shared_ptr<const grammar::Grammar> compile(const std::string& gbnf) {
    Result<grammar::Grammar> g = grammar::parse_gbnf(gbnf);
    EXPECT_TRUE(g.ok()) << g.message();
    return std::make_shared<const grammar::Grammar>(std::move(g).value());
  }
  GenerateRequest request(const std::shared_ptr<const grammar::Grammar>& g, float temperature, uint64_t seed) {
    GenerateRequest r;
    r.prompt = l_.tok->encode("Once upon a time", true, false);
    r.sampling.temperature = temperature;
    r.sampling.seed = seed;
    r.max_tokens = 300;
    if (g) r.constraint = std::make_shared<GrammarConstraint>(g, vocab_);
    return r;
  }
  std::string text(const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += l_.tok->token_to_piece(id);
    return s;
  }
  test::LoadedModel l_;
  std::shared_ptr<const GrammarVocab> vocab_;
};

TEST_F(GrammarConstraintTest, SampledOutputsFollowTheSchema) {
  Result<std::string> gbnf = grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},"n":{"type":"integer"},
          "tags":{"type":"array","items":{"enum":["x","y"]},"maxItems":3}},"required":["name","n","tags"]})"),
      {.strict = true});
  ASSERT_TRUE(gbnf.ok()) << gbnf.message();
  auto g = compile(*gbnf);
  auto e = engine();
  std::vector<RequestStream> streams;
  for (uint64_t seed = 1; seed <= 8; ++seed) streams.push_back(std::move(e->submit(request(g, 1.0f, seed))).value());
  test::run_until_idle(*e);
  for (RequestStream& s : streams) {
    test::Collected c;
    test::collect(s, c);
    ASSERT_EQ(*c.finish, FinishReason::Stop) << c.error << ": " << text(c.tokens);
    const nlohmann::json v = nlohmann::json::parse(text(c.tokens), nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << text(c.tokens);
    EXPECT_TRUE(v["name"].is_string() && v["n"].is_number_integer() && v["tags"].is_array()) << text(c.tokens);
    EXPECT_LE(v["tags"].size(), 3u);
    EXPECT_EQ(v.size(), 3u) << text(c.tokens);
  }
}

TEST_F(GrammarConstraintTest, GreedyConstrainedInABatchEqualsAlone) {
  auto g = compile("root ::= [a-z ]{1,40} \".\"");
  auto alone_engine = engine();
  auto a = alone_engine->submit(request(g, 0.0f, 0));
  ASSERT_TRUE(a.ok());
  test::run_until_idle(*alone_engine);
  test::Collected alone;
  test::collect(*a, alone);
  ASSERT_EQ(*alone.finish, FinishReason::Stop);
  const std::string t = text(alone.tokens);
  EXPECT_EQ(t.back(), '.');
  EXPECT_EQ(t.find_first_not_of("abcdefghijklmnopqrstuvwxyz ."), std::string::npos) << t;

  auto e = engine();
  std::vector<RequestStream> others;
  for (uint64_t seed = 1; seed <= 3; ++seed) others.push_back(std::move(e->submit(request(nullptr, 1.0f, seed))).value());
  auto b = e->submit(request(g, 0.0f, 0));
  ASSERT_TRUE(b.ok());
  test::run_until_idle(*e);
  test::Collected batched;
  test::collect(*b, batched);
  EXPECT_EQ(batched.tokens, alone.tokens);
}

TEST_F(GrammarConstraintTest, EndOfGenerationOnlyWhenComplete) {
  auto g = compile("root ::= \"ab\"");
  GrammarConstraint c(g, vocab_);
  std::vector<float> logits(static_cast<size_t>(l_.tok->n_vocab()), 0.0f);
  ASSERT_TRUE(c.mask(logits));
  EXPECT_EQ(logits[static_cast<size_t>(l_.tok->eos())], -std::numeric_limits<float>::infinity());
  std::vector<int32_t> ab;  // the tokens of "a" and "b" alone (encode would add SentencePiece's space)
  for (const char* piece : {"a", "b"})
    ab.push_back(static_cast<int32_t>(std::find(vocab_->pieces.begin(), vocab_->pieces.end(), piece) - vocab_->pieces.begin()));
  for (int32_t id : ab) EXPECT_TRUE(c.accept(id));
  std::fill(logits.begin(), logits.end(), 0.0f);
  ASSERT_TRUE(c.mask(logits));
  for (size_t i = 0; i < logits.size(); ++i)  // complete, and nothing may follow: end it
    EXPECT_EQ(logits[i] == 0.0f, std::binary_search(vocab_->end_of_generation.begin(), vocab_->end_of_generation.end(),
                                                    static_cast<int32_t>(i))) << i;
  EXPECT_FALSE(c.accept(ab[0]));
}

}  // namespace
}  // namespace th::server
