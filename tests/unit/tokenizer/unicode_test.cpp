#include "tokenizer/unicode.h"

#include <gtest/gtest.h>

namespace th::unicode {
namespace {

TEST(Unicode, DecodesLikeLlamaCpp) {
  EXPECT_EQ(decode_utf8("a\xC3\xA9"), (std::vector<uint32_t>{'a', 0xE9}));
  // A stray continuation byte or a cut sequence: one U+FFFD per byte, then go on.
  EXPECT_EQ(decode_utf8("\x80x"), (std::vector<uint32_t>{0xFFFD, 'x'}));
  EXPECT_EQ(decode_utf8("\xE6\x88x"), (std::vector<uint32_t>{0xFFFD, 0xFFFD, 'x'}));
  // Lenient like llama.cpp: an overlong form decodes to its value.
  EXPECT_EQ(decode_utf8("\xC0\x80"), (std::vector<uint32_t>{0}));
  // Past U+10FFFF (llama.cpp would throw later): U+FFFD.
  EXPECT_EQ(decode_utf8("\xF7\xBF\xBF\xBF"), (std::vector<uint32_t>{0xFFFD}));
  EXPECT_EQ(decode_utf8("\xF0\x9F\xA6\x99"), (std::vector<uint32_t>{0x1F999}));
}

TEST(Unicode, ByteLevelMapping) {
  EXPECT_EQ(byte_to_utf8(' '), "\xC4\xA0");  // Ġ
  EXPECT_EQ(byte_to_utf8('\n'), "\xC4\x8A");  // Ċ
  EXPECT_EQ(byte_to_utf8('a'), "a");
  for (int b = 0; b < 256; ++b) {
    const std::vector<uint32_t> c = decode_utf8(byte_to_utf8(static_cast<uint8_t>(b)));
    ASSERT_EQ(c.size(), 1u);
    uint8_t back = 0;
    ASSERT_TRUE(utf8_cpt_to_byte(c[0], &back));
    EXPECT_EQ(back, b);
  }
  uint8_t x;
  EXPECT_FALSE(utf8_cpt_to_byte(0x4E00, &x));
}

TEST(Unicode, StrictValidity) {
  EXPECT_TRUE(is_valid_utf8("h\xC3\xA9llo \xF0\x9F\xA6\x99"));
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_EQ(valid_utf8_prefix("ab\xE6\x88"), 2u);
}

TEST(Unicode, DrainHoldsAnUnfinishedCharacter) {
  std::string p = "a\xE6\x88";
  EXPECT_EQ(drain_utf8(p, false), "a");
  EXPECT_EQ(p, "\xE6\x88");
  p += "\x91";
  EXPECT_EQ(drain_utf8(p, false), "\xE6\x88\x91");
  EXPECT_TRUE(p.empty());
}

TEST(Unicode, DrainReplacesWhatCanNeverBeValid) {
  std::string p = "\xFF" "a" "\xE6\x88" "b";
  EXPECT_EQ(drain_utf8(p, false), "\xEF\xBF\xBD" "a" "\xEF\xBF\xBD" "b");
  EXPECT_TRUE(p.empty());
  p = "\xF0\x9F\xA6";
  EXPECT_EQ(drain_utf8(p, false), "");
  EXPECT_EQ(drain_utf8(p, true), "\xEF\xBF\xBD");
  EXPECT_TRUE(p.empty());
}

}  // namespace
}  // namespace th::unicode
