// Vocab checks: what Tokenizer::create refuses, and what vocab_from_gguf
// fills in when keys are absent (llama.cpp's defaults).
#include "tokenizer/vocab.h"

#include <gtest/gtest.h>

#include <functional>

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace th {
namespace {

VocabData small_bpe() {
  VocabData v;
  v.model = TokenizerModel::Bpe;
  v.pre = "gpt-2";
  v.tokens = {"a", "b", "c", "ab", "abc", "\xC4\xA0", "<|endoftext|>"};
  v.merges = {"a b", "ab c"};
  v.bos = v.eos = 6;
  v.add_bos = false;
  v.add_space_prefix = false;
  return v;
}

void expect_error(VocabData v, const std::string& fragment) {
  Result<Tokenizer> t = Tokenizer::create(std::move(v));
  ASSERT_FALSE(t.ok()) << "expected an error containing: " << fragment;
  EXPECT_NE(t.message().find(fragment), std::string::npos) << t.message();
  EXPECT_EQ(t.message().find('\n'), std::string::npos) << "one line: " << t.message();
}

TEST(Vocab, SmallBpeWorks) {
  Result<Tokenizer> t = Tokenizer::create(small_bpe());
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->encode("abc", false, false), (std::vector<int32_t>{4}));
  EXPECT_EQ(t->encode("ab ab", false, false), (std::vector<int32_t>{3, 5, 3}));
  EXPECT_EQ(t->decode({3, 5, 3}), "ab ab");
}

TEST(Vocab, RefusesMismatchedLengths) {
  VocabData v = small_bpe();
  v.scores = {0.0f, 1.0f};
  expect_error(v, "tokenizer.ggml.scores has 2 entries for 7 tokens");
  v = small_bpe();
  v.types = {TokenType::Normal};
  expect_error(v, "tokenizer.ggml.token_type has 1 entries for 7 tokens");
}

TEST(Vocab, RefusesBadMerge) {
  VocabData v = small_bpe();
  v.merges.push_back("abc");
  expect_error(v, "tokenizer.ggml.merges[2] = 'abc' is not two tokens separated by a space");
  v = small_bpe();
  v.merges.push_back("ab ");
  expect_error(v, "is not two tokens separated by a space");
}

TEST(Vocab, RefusesUnknownPreTokenizer) {
  VocabData v = small_bpe();
  v.pre = "no-such-pre";
  expect_error(v, "unknown pre-tokenizer 'no-such-pre'");
}

TEST(Vocab, RefusesOutOfRangeIds) {
  VocabData v = small_bpe();
  v.bos = 7;
  expect_error(v, "bos token id 7 is out of range for a vocabulary of 7 tokens");
  v = small_bpe();
  v.unk = -5;
  expect_error(v, "unknown token id -5 is out of range");
  v = small_bpe();
  v.add_bos = true;
  v.bos = -1;
  expect_error(v, "add_bos_token is set but the vocabulary has no BOS token");
}

TEST(Vocab, RefusesDuplicatesAndEmptiness) {
  VocabData v = small_bpe();
  v.tokens.push_back("ab");
  expect_error(v, "token 7 ('ab') repeats token 3");
  v = small_bpe();
  v.tokens.clear();
  v.bos = v.eos = -1;
  expect_error(v, "the vocabulary has no tokens");
}

TEST(Vocab, WordPieceIsUnsupported) {
  VocabData v = small_bpe();
  v.model = TokenizerModel::Wpm;
  expect_error(v, "WordPiece tokenizers are not supported yet");
}

// A minimal GGUF with just what the test puts in.
Result<VocabData> from_kv(const std::function<void(GgufWriter&)>& fill) {
  GgufWriter w;
  fill(w);
  const std::vector<uint8_t> bytes = w.to_bytes();  // outlives f; VocabData copies what it needs
  TH_ASSIGN_OR_RETURN(GgufFile f, GgufFile::parse(bytes.data(), bytes.size(), "test.gguf"));
  return vocab_from_gguf(f);
}

GgufArray strings(std::vector<std::string> s) {
  GgufArray a;
  a.elem_type = GgufType::STRING;
  a.strings = std::move(s);
  return a;
}

std::vector<std::string> n_tokens(int n) {
  std::vector<std::string> t;
  for (int i = 0; i < n; ++i) t.push_back(std::string(1, 't').append(std::to_string(i)));
  return t;
}

TEST(VocabFromGguf, LlamaDefaults) {
  Result<VocabData> v = from_kv([](GgufWriter& w) {
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_array("tokenizer.ggml.tokens", strings(n_tokens(4)));
    w.add_u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);  // "none", as converters write it
  });
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_EQ(v->model, TokenizerModel::Spm);
  EXPECT_EQ(v->bos, 1);
  EXPECT_EQ(v->eos, 2);
  EXPECT_EQ(v->unk, 0);
  EXPECT_EQ(v->pad, -1);
  EXPECT_TRUE(v->add_bos);
  EXPECT_FALSE(v->add_eos);
  EXPECT_TRUE(v->add_space_prefix);
  EXPECT_EQ(v->pre, "default");
  EXPECT_TRUE(v->scores.empty());
}

TEST(VocabFromGguf, Gpt2DefaultsAndKeys) {
  Result<VocabData> v = from_kv([](GgufWriter& w) {
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_array("tokenizer.ggml.tokens", strings(n_tokens(20)));
    w.add_array("tokenizer.ggml.merges", strings({"t1 t2"}));
    w.add_u32("tokenizer.ggml.eos_token_id", 19);
    w.add_bool("tokenizer.ggml.add_eos_token", true);
  });
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_EQ(v->model, TokenizerModel::Bpe);
  EXPECT_EQ(v->bos, 11);  // llama.cpp's BPE default
  EXPECT_EQ(v->eos, 19);
  EXPECT_EQ(v->unk, -1);
  EXPECT_FALSE(v->add_bos);
  EXPECT_TRUE(v->add_eos);
  EXPECT_FALSE(v->add_space_prefix);
  EXPECT_EQ(v->merges, (std::vector<std::string>{"t1 t2"}));
}

TEST(VocabFromGguf, Llama3PreAddsBos) {
  Result<VocabData> v = from_kv([](GgufWriter& w) {
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", "llama-bpe");
    w.add_array("tokenizer.ggml.tokens", strings(n_tokens(5)));
    w.add_array("tokenizer.ggml.merges", strings({}));
  });
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_TRUE(v->add_bos);
  EXPECT_EQ(v->bos, -1);  // default 11 is outside a 5-token vocab
}

TEST(VocabFromGguf, Errors) {
  auto err = [](const std::function<void(GgufWriter&)>& fill) {
    Result<VocabData> v = from_kv(fill);
    return v.ok() ? std::string("ok") : v.message();
  };
  EXPECT_NE(err([](GgufWriter& w) { w.add_string("general.name", "x"); })
                .find("missing metadata key 'tokenizer.ggml.model'"),
            std::string::npos);
  EXPECT_NE(err([](GgufWriter& w) {
              w.add_string("tokenizer.ggml.model", "t5");
              w.add_array("tokenizer.ggml.tokens", strings(n_tokens(3)));
            }).find("unsupported tokenizer model 't5'"),
            std::string::npos);
  EXPECT_NE(err([](GgufWriter& w) {
              w.add_string("tokenizer.ggml.model", "gpt2");
              w.add_array("tokenizer.ggml.tokens", strings(n_tokens(3)));
            }).find("without tokenizer.ggml.merges"),
            std::string::npos);
  EXPECT_NE(err([](GgufWriter& w) {
              w.add_string("tokenizer.ggml.model", "llama");
              w.add_array("tokenizer.ggml.tokens", strings(n_tokens(3)));
              GgufArray s;
              s.elem_type = GgufType::FLOAT32;
              s.floats = {0, 0};
              w.add_array("tokenizer.ggml.scores", s);
            }).find("tokenizer.ggml.scores has 2 entries for 3 tokens"),
            std::string::npos);
  EXPECT_NE(err([](GgufWriter& w) {
              w.add_string("tokenizer.ggml.model", "llama");
              GgufArray t;
              t.elem_type = GgufType::INT32;
              t.ints = {1, 2};
              w.add_array("tokenizer.ggml.tokens", t);
            }).find("'tokenizer.ggml.tokens' is an array of"),
            std::string::npos);
}

}  // namespace
}  // namespace th
