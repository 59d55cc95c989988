// The incremental detokenizer never hands out part of a UTF-8 character, even
// when the character comes as several byte tokens.
#include <gtest/gtest.h>

#include "format/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace th {
namespace {

Tokenizer load_spm() {
  Result<GgufFile> f =
      GgufFile::open(test::shared_path("testdata/tokenizer/llamacpp/ggml-vocab-llama-spm.gguf"));
  EXPECT_TRUE(f.ok()) << f.message();
  Result<Tokenizer> t = Tokenizer::from_gguf(*f);
  EXPECT_TRUE(t.ok()) << t.message();
  return std::move(t).value();
}

size_t count_byte_tokens(const Tokenizer& t, const std::vector<int32_t>& ids) {
  size_t n = 0;
  for (int32_t id : ids) n += t.vocab().types.at(id) == TokenType::Byte;
  return n;
}

TEST(Detokenizer, NeverEmitsHalfACharacter) {
  const Tokenizer t = load_spm();
  for (const std::string text : {"Llamas \xF0\x9F\xA6\x99 and clefs \xF0\x9D\x84\x9E!",
                                 "\xE9\xBF\x95\xF0\x9F\x98\xB6\xE2\x80\x8D\xF0\x9F\x8C\xAB\xEF\xB8\x8F x",
                                 "\xF0\x9F\xA6\x99", "a\nb"}) {
    const std::vector<int32_t> ids = t.encode(text, /*add_special=*/true, false);
    if (text != "a\nb") {
      ASSERT_GE(count_byte_tokens(t, ids), 4u) << "expected byte fallback for " << text;
    }
    Detokenizer d(t);
    std::string all;
    for (int32_t id : ids) {
      const std::string chunk = d.push(id);
      EXPECT_TRUE(unicode::is_valid_utf8(chunk)) << "chunk after id " << id;
      all += chunk;
    }
    all += d.flush();
    EXPECT_EQ(all, text);
    EXPECT_EQ(t.decode(ids), text);
  }
}

TEST(Detokenizer, HoldsBytesUntilTheCharacterIsComplete) {
  const Tokenizer t = load_spm();
  // U+6211 我 = E6 88 91; byte token <0xNN> is id NN + 3 in this vocab.
  Detokenizer d(t);
  EXPECT_EQ(d.push(0xE6 + 3), "");
  EXPECT_EQ(d.push(0x88 + 3), "");
  EXPECT_EQ(d.push(0x91 + 3), "\xE6\x88\x91");
  EXPECT_EQ(d.flush(), "");
}

TEST(Detokenizer, InvalidBytesBecomeReplacementCharacters) {
  const Tokenizer t = load_spm();
  Detokenizer d(t);
  EXPECT_EQ(d.push(0xFF + 3), "\xEF\xBF\xBD");              // can never start a character
  EXPECT_EQ(d.push(0xE6 + 3), "");
  EXPECT_EQ(d.push('A' + 3), "\xEF\xBF\xBD" "A");            // the E6 was cut short
  EXPECT_EQ(d.push(0xF0 + 3), "");
  EXPECT_EQ(d.flush(), "\xEF\xBF\xBD");                      // left over at the end
}

TEST(Detokenizer, DropsTheDummySpaceAfterBosOnly) {
  const Tokenizer t = load_spm();
  const std::vector<int32_t> ids = t.encode("Hello world", false, false);  // ▁Hello ▁world
  Detokenizer with_bos(t);
  std::string a = with_bos.push(1);
  for (int32_t id : ids) a += with_bos.push(id);
  EXPECT_EQ(a, "Hello world");
  // A stream that does not start with BOS continues a text: keep the space.
  Detokenizer cont(t);
  std::string b;
  for (int32_t id : ids) b += cont.push(id);
  EXPECT_EQ(b, " Hello world");
}

// A tool-call marker that is a control token (Llama 3's <|python_tag|>, Mistral's
// [TOOL_CALLS]) prints as nothing unless the detokenizer is told to render it; Phi-3's
// <|end|> (a control token) stands in for them here.
TEST(Detokenizer, RendersTheControlTokensItIsGiven) {
  Result<GgufFile> f = GgufFile::open(test::shared_path("testdata/tokenizer/llamacpp/ggml-vocab-phi-3.gguf"));
  ASSERT_TRUE(f.ok()) << f.message();
  Result<Tokenizer> t = Tokenizer::from_gguf(*f);
  ASSERT_TRUE(t.ok()) << t.message();
  const std::vector<int32_t> marker = t->encode("<|end|>", false, true);
  ASSERT_EQ(marker.size(), 1u);
  ASSERT_EQ(t->token_to_piece(marker[0]), "");  // a control token
  const std::vector<int32_t> text = t->encode("a<|end|>b", false, true);
  auto run = [&](Detokenizer d) {
    std::string out;
    for (int32_t id : text) out += d.push(id);
    return out + d.flush();
  };
  EXPECT_EQ(run(Detokenizer(*t)), t->decode(text));
  Detokenizer rendering(*t);
  rendering.render_control({marker[0]});
  const std::string shown = run(std::move(rendering));
  EXPECT_NE(shown.find("<|end|>"), std::string::npos) << shown;
  EXPECT_EQ(shown.size(), run(Detokenizer(*t)).size() + 7);
}

}  // namespace
}  // namespace th
