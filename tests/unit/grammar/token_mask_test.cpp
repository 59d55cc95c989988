// The trie walk's mask against the definition: a token is allowed exactly when the
// matcher accepts its bytes. Checked on real vocabularies (SentencePiece with byte
// fallback, byte-level BPE) at several states of several grammars.
#include <gtest/gtest.h>

#include "format/gguf.h"
#include "grammar/json_schema.h"
#include "grammar/token_trie.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "unit/grammar/grammar_test_util.h"

namespace th::grammar {
namespace {

std::vector<std::string> pieces_of(const std::string& gguf) {
  Result<GgufFile> f = GgufFile::open(th::test::shared_path(gguf));
  EXPECT_TRUE(f.ok()) << f.message();
  if (!f.ok()) return {};
  Result<Tokenizer> tok = Tokenizer::from_gguf(*f);
  EXPECT_TRUE(tok.ok()) << tok.message();
  if (!tok.ok()) return {};
  std::vector<std::string> pieces;
  for (int32_t id = 0; id < tok->n_vocab(); ++id) pieces.push_back(tok->token_to_piece(id));
  return pieces;
}

void expect_mask_is_brute_force(const std::vector<std::string>& pieces, const std::shared_ptr<const Grammar>& g,
                                const std::vector<std::string>& states) {
  const TokenTrie trie(pieces);
  for (const std::string& prefix : states) {
    Matcher m(g);
    ASSERT_TRUE(m.accept(prefix)) << prefix;
    Matcher before = m;  // a copy with caches of its own: the walk's never answer for it
    std::vector<uint64_t> mask;
    m.allowed_tokens(trie, mask);
    int64_t n_allowed = 0;
    for (size_t id = 0; id < pieces.size(); ++id) {
      const bool want = !pieces[id].empty() && before.accepts(pieces[id]);
      const bool got = (mask[id >> 6] >> (id & 63)) & 1;
      n_allowed += got;
      ASSERT_EQ(got, want) << "token " << id << " '" << pieces[id] << "' after '" << prefix << "'";
    }
    // A state where nothing or everything is allowed would test little.
    EXPECT_GT(n_allowed, 0) << prefix;
    EXPECT_LT(n_allowed, static_cast<int64_t>(pieces.size())) << prefix;
  }
}

std::shared_ptr<const Grammar> person_schema() {
  Result<std::string> s = json_schema_to_gbnf(nlohmann::ordered_json::parse(
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":20},"age":{"type":"integer"},
          "tags":{"type":"array","items":{"enum":["a b","c"]}}},"required":["name"]})"));
  EXPECT_TRUE(s.ok()) << s.message();
  return test::compile(*s);
}

const std::vector<std::string> kJsonStates = {"", "{", "{\"name\": \"Bo", "{\"name\":\"\\", "{\"name\":\"x\"",
                                              "{\"name\":\"x\", \"age\": -", "{\"name\":\"x\",\"tags\":[\"a"};

TEST(TokenMask, EqualsBruteForceOnStories260K) {
  auto pieces = pieces_of("models/stories260K.gguf");
  ASSERT_FALSE(pieces.empty());
  expect_mask_is_brute_force(pieces, person_schema(), kJsonStates);
  expect_mask_is_brute_force(pieces, test::compile("root ::= [a-z ]+ \"!\" | \"é\"{2}"), {"", "once upon", "\xC3"});
}

TEST(TokenMask, EqualsBruteForceOnLlamaSpmVocab) {
  auto pieces = pieces_of("testdata/tokenizer/llamacpp/ggml-vocab-llama-spm.gguf");
  ASSERT_EQ(pieces.size(), 32000u);
  expect_mask_is_brute_force(pieces, person_schema(), kJsonStates);
}

TEST(TokenMask, EqualsBruteForceOnGpt2Vocab) {
  auto pieces = pieces_of("testdata/tokenizer/llamacpp/ggml-vocab-gpt-2.gguf");
  ASSERT_GT(pieces.size(), 50000u);
  expect_mask_is_brute_force(pieces, person_schema(), kJsonStates);
  // Multi-byte characters split across tokens: the matcher holds half a character.
  expect_mask_is_brute_force(pieces, test::compile("root ::= [^a-z]{1,3} \"x\""), {"", "\xE4", "\xE4\xB8", "\xE4\xB8\xAD"});
}

// One matcher along a whole generation keeps the masks of sets it meets again (inside a
// string): each kept mask must be what a fresh matcher's walk gives at that point.
TEST(TokenMask, KeptMasksEqualAFreshWalkAlongAGeneration) {
  auto pieces = pieces_of("testdata/tokenizer/llamacpp/ggml-vocab-llama-spm.gguf");
  ASSERT_EQ(pieces.size(), 32000u);
  const TokenTrie trie(pieces);
  const std::shared_ptr<const Grammar> g = test::compile(*json_schema_to_gbnf(nlohmann::ordered_json::parse(
      R"({"type":"object","properties":{"story":{"type":"string"},"n":{"type":"integer"}},"required":["story","n"]})")));
  const std::string doc = R"({"story": "once upon a time there was a little girl who liked to play outside", "n": 12})";
  Matcher kept(g);
  std::string done;
  std::vector<uint64_t> mask, fresh_mask;
  while (done.size() < doc.size()) {
    kept.allowed_tokens(trie, mask);
    Matcher fresh(g);
    ASSERT_TRUE(fresh.accept(done));
    fresh.allowed_tokens(trie, fresh_mask);
    ASSERT_EQ(mask, fresh_mask) << "after '" << done << "'";
    size_t best = 0, best_len = 0;  // the longest allowed token that goes on with the document
    for (size_t id = 0; id < pieces.size(); ++id) {
      const bool allowed = (mask[id >> 6] >> (id & 63)) & 1;
      if (allowed && pieces[id].size() > best_len && doc.compare(done.size(), pieces[id].size(), pieces[id]) == 0)
        best = id, best_len = pieces[id].size();
    }
    ASSERT_GT(best_len, 0u) << "no token goes on after '" << done << "'";
    ASSERT_TRUE(kept.accept(pieces[best]));
    done += pieces[best];
  }
  EXPECT_TRUE(kept.complete());
  EXPECT_GE(kept.kept_masks(), 1u);  // the string's set, met at every word
}

TEST(TokenMask, TrieHoldsEveryNonEmptyToken) {
  const std::vector<std::string> pieces = {"a", "ab", "", "b", "ab", "abc"};
  const TokenTrie trie(pieces);
  EXPECT_EQ(trie.n_vocab(), 6);
  size_t tokens = 0;
  std::vector<const TokenTrie::Node*> todo{&trie.root()};
  while (!todo.empty()) {
    const TokenTrie::Node* n = todo.back();
    todo.pop_back();
    tokens += n->n_tokens;
    for (const TokenTrie::Node& c : trie.children(*n)) todo.push_back(&c);
  }
  EXPECT_EQ(tokens, 5u);  // the empty piece is left out
  EXPECT_EQ(trie.n_nodes(), 5u);  // root, a, ab, abc, b
}

}  // namespace
}  // namespace th::grammar
