#include "tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include "tokenizer/unicode.h"

namespace th {
namespace {

// The words of `text`, byte-level decoding undone so they read as text.
std::vector<std::string> words(const char* pre, const std::string& text) {
  Result<PreTokenizer> p = PreTokenizer::create(pre);
  EXPECT_TRUE(p.ok()) << p.message();
  PreTokenized w;
  p->split(text, &w);
  std::vector<std::string> out;
  for (const auto& [b, n] : w.spans) {
    std::string s;
    for (uint32_t c : unicode::decode_utf8(std::string_view(w.text).substr(b, n))) {
      uint8_t byte;
      EXPECT_TRUE(unicode::utf8_cpt_to_byte(c, &byte));
      s.push_back(static_cast<char>(byte));
    }
    out.push_back(s);
  }
  return out;
}

using W = std::vector<std::string>;

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(words("gpt-2", "Hello  world's 42!"), (W{"Hello", " ", " world", "'s", " 42", "!"}));
  EXPECT_EQ(words("gpt-2", "a \n"), (W{"a", " \n"}));
  EXPECT_EQ(words("gpt-2", ""), W{});
}

TEST(PreTokenizer, NonAsciiWhitespaceIsWhitespace) {
  // U+3000 is \s but not the ' ' of " ?\p{L}+".
  EXPECT_EQ(words("gpt-2", "x\xE3\x80\x80y"), (W{"x", "\xE3\x80\x80", "y"}));
  EXPECT_EQ(words("gpt-2", "x\xE3\x80\x80\xE3\x80\x80y"), (W{"x", "\xE3\x80\x80", "\xE3\x80\x80", "y"}));
}

TEST(PreTokenizer, LookaheadStopsAtThePieceEnd) {
  // starcoder first cuts out each digit; "a  " is then a piece of its own, so
  // \s+(?!\S) takes both spaces (llama.cpp's splitter sees the piece end too).
  EXPECT_EQ(words("starcoder", "a  1"), (W{"a", "  ", "1"}));
  EXPECT_EQ(words("gpt-2", "a  1"), (W{"a", " ", " 1"}));
}

TEST(PreTokenizer, InvalidUtf8BecomesReplacementCharacter) {
  EXPECT_EQ(words("gpt-2", "a\xFF" "b"), (W{"a", "\xEF\xBF\xBD", "b"}));
}

TEST(PreTokenizer, Llama3AndQwen2Digits) {
  EXPECT_EQ(words("llama-bpe", "12345 I'M"), (W{"123", "45", " I", "'M"}));
  EXPECT_EQ(words("qwen2", "123"), (W{"1", "2", "3"}));
}

TEST(PreTokenizer, LongRunsDoNotRunOutOfStack) {
  // tekken's repeated lookahead group needs more than PCRE2's JIT stack here.
  const std::string run = std::string(100000, 'A') + std::string(100000, 'b');
  const W w = words("tekken", run + " c");
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0], run);
  EXPECT_EQ(w[1], " c");
  EXPECT_EQ(words("gpt-2", std::string(200000, ' ') + "x").size(), 2u);
}

TEST(PreTokenizer, UnknownName) {
  Result<PreTokenizer> p = PreTokenizer::create("nope");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find("unknown pre-tokenizer 'nope'"), std::string::npos);
  EXPECT_TRUE(PreTokenizer::create("").ok());  // absent: "default"
}

}  // namespace
}  // namespace th
