// NFC (tokenizer/unicode_nfc.h) against Unicode's own conformance test: the NFC columns of
// NormalizationTest.txt (tests/data/unicode/nfc_vectors.txt, written with the tables by
// scripts/gen_unicode_nfc.py from the same Unicode version), and its rule that every code
// point Part 1 does not list is its own NFC.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "test_util.h"
#include "tokenizer/unicode.h"
#include "tokenizer/unicode_nfc.h"

namespace th {
namespace {

std::string utf8_of(const std::string& hex_cps) {
  std::istringstream in(hex_cps);
  std::string out, h;
  while (in >> h) unicode::append_utf8(out, static_cast<uint32_t>(std::stoul(h, nullptr, 16)));
  return out;
}

std::string hex_of(const std::string& s) {
  std::string out;
  for (uint32_t cp : unicode::decode_utf8(s)) out += (out.empty() ? "" : " ") + (std::ostringstream() << std::hex << cp).str();
  return out;
}

TEST(UnicodeNfc, NormalizationTestVectors) {
  std::ifstream f(test::source_path("tests/data/unicode/nfc_vectors.txt"));
  ASSERT_TRUE(f) << "tests/data/unicode/nfc_vectors.txt is missing";
  std::string line, part;
  std::unordered_set<uint32_t> part1;  // single code points Part 1 lists
  size_t lines = 0, failures = 0;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '@') {
      part = line;
      continue;
    }
    std::vector<std::string> c;
    std::istringstream cols(line);
    for (std::string col; std::getline(cols, col, ';');) c.push_back(col);
    ASSERT_EQ(c.size(), 3u) << line;
    ++lines;
    if (part == "@Part1" && c[0].find(' ') == std::string::npos) part1.insert(static_cast<uint32_t>(std::stoul(c[0], nullptr, 16)));
    const std::string want = utf8_of(c[1]);
    for (const std::string& in : c) {
      const std::string got = unicode::to_nfc(utf8_of(in));
      if (got != want && ++failures <= 10)
        ADD_FAILURE() << part << ": NFC(" << in << ") = " << hex_of(got) << ", want " << c[1];
    }
  }
  EXPECT_GT(lines, 8000u);  // the file as generated: 8,081 test lines
  EXPECT_EQ(failures, 0u);

  // Every other code point (surrogates aside; Hangul syllables, thinned out in the file, are
  // all listed in the full Part 1) is its own NFC.
  size_t identity = 0;
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if ((cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0xAC00 && cp <= 0xD7A3) || part1.count(cp)) continue;
    std::string s;
    unicode::append_utf8(s, cp);
    if (unicode::to_nfc(s) != s && ++failures <= 10) ADD_FAILURE() << "NFC(" << std::hex << cp << ") changed it";
    ++identity;
  }
  EXPECT_GT(identity, 1'000'000u);
  EXPECT_EQ(failures, 0u);
}

TEST(UnicodeNfc, QuickCheckAndInvalidBytes) {
  EXPECT_TRUE(unicode::nfc_quick_yes("plain ASCII, Latin-1 \xC3\xA9 and CJK \xE4\xB8\xAD"));
  EXPECT_FALSE(unicode::nfc_quick_yes("e\xCC\x81"));  // e + U+0301
  EXPECT_EQ(unicode::to_nfc("e\xCC\x81"), "\xC3\xA9");
  // An invalid byte stays, and nothing composes across it.
  EXPECT_EQ(unicode::to_nfc("e\xFF\xCC\x81"), "e\xFF\xCC\x81");
  EXPECT_EQ(unicode::to_nfc("e\xCC\x81\xFF" "a\xCC\x80"), "\xC3\xA9\xFF\xC3\xA0");
  EXPECT_FALSE(unicode::nfc_quick_yes("a\xCC"));  // a truncated U+03xx
  EXPECT_EQ(unicode::to_nfc("a\xCC"), "a\xCC");
  EXPECT_EQ(unicode::to_nfc("\xED\xA0\x80\xCC\x81"), "\xED\xA0\x80\xCC\x81");  // a surrogate: bytes kept
  // A precomposed character below U+0300 decomposes when a mark follows: U+0165 (t caron) +
  // U+0331 (macron below, class 220, before the caron's 230) -> U+1E6F U+030C; U+00C1 + U+0328
  // + U+0344 -> U+0104 U+0301 U+0308 U+0301 (two random strings the Qwen oracle caught).
  EXPECT_EQ(unicode::to_nfc("\xC5\xA5\xCC\xB1"), "\xE1\xB9\xAF\xCC\x8C");
  EXPECT_EQ(unicode::to_nfc("\xC3\x81\xCC\xA8\xCD\x84"), "\xC4\x84\xCC\x81\xCC\x88\xCC\x81");
  // Hangul: L + V + T composes to one syllable (U+1100 U+1161 U+11A8 -> U+AC01).
  EXPECT_EQ(unicode::to_nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");
  EXPECT_EQ(unicode::combining_class(0x301), 230);
  EXPECT_EQ(unicode::combining_class('a'), 0);
}

}  // namespace
}  // namespace th
