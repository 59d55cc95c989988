// llama.cpp's tokenizer test vectors (ggml-vocab-*.gguf with .inp/.out): every
// case must give exactly llama.cpp's ids, encoded with add_special=false and
// parse_special=false as its test-tokenizer-0 does.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace th {
namespace {

std::string vocab_path(const std::string& name) {
  return test::shared_path("testdata/tokenizer/llamacpp/ggml-vocab-" + name + ".gguf");
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// .inp: each case followed by "\n__ggml_vocab_test__\n"; .out: one line of
// space-separated ids per case.
std::vector<Case> read_cases(const std::string& name) {
  const std::string inp = read_file(vocab_path(name) + ".inp");
  const std::string out = read_file(vocab_path(name) + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  for (size_t pos = 0, hit; (hit = inp.find(sep, pos)) != std::string::npos; pos = hit + sep.size())
    cases.push_back({inp.substr(pos, hit - pos), {}});
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line)) {
    if (i < cases.size()) {
      std::istringstream ids(line);
      for (int32_t id; ids >> id;) cases[i].ids.push_back(id);
    }
    ++i;
  }
  EXPECT_EQ(i, cases.size()) << name << ": .out has " << i << " lines for " << cases.size()
                             << " cases";
  return cases;
}

std::string show_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

std::string show_text(const std::string& t) {
  std::string s;
  for (unsigned char c : t) {
    if (c == '\n') s += "\\n";
    else if (c == '\t') s += "\\t";
    else s.push_back(static_cast<char>(c));
  }
  return "'" + s + "'";
}

Result<Tokenizer> load(const std::string& name) {
  TH_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(vocab_path(name)));
  return Tokenizer::from_gguf(f);
}

class TokenizerVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerVectors, EveryCaseMatchesLlamaCpp) {
  const std::string name = GetParam();
  Result<Tokenizer> tok = load(name);
  ASSERT_TRUE(tok.ok()) << tok.message();
  const std::vector<Case> cases = read_cases(name);
  ASSERT_FALSE(cases.empty());
  size_t passed = 0;
  for (const Case& c : cases) {
    const std::vector<int32_t> got = tok->encode(c.text, /*add_special=*/false, /*parse_special=*/false);
    if (got == c.ids) {
      ++passed;
    } else {
      ADD_FAILURE() << name << ": case " << show_text(c.text) << "\n  expected:" << show_ids(c.ids)
                    << "\n  got:     " << show_ids(got);
    }
  }
  std::printf("[ vectors  ] %s %zu/%zu\n", name.c_str(), passed, cases.size());
  EXPECT_EQ(passed, cases.size());
}

// What decoding gives back (see the convention in tokenizer.cpp): byte-level
// BPE returns the text exactly; SPM returns it exactly when BOS precedes it,
// and with the encoder's dummy space in front when it does not.
TEST_P(TokenizerVectors, DecodeRoundTrips) {
  const std::string name = GetParam();
  Result<Tokenizer> tok = load(name);
  ASSERT_TRUE(tok.ok()) << tok.message();
  const bool spm = tok->vocab().model == TokenizerModel::Spm;
  for (const Case& c : read_cases(name)) {
    if (spm) {
      EXPECT_EQ(tok->decode(tok->encode(c.text, true, false)), c.text) << name << " " << show_text(c.text);
      const std::string bare = tok->decode(tok->encode(c.text, false, false));
      EXPECT_EQ(bare, c.text.empty() ? "" : " " + c.text) << name << " " << show_text(c.text);
    } else {
      EXPECT_EQ(tok->decode(tok->encode(c.text, false, false)), c.text) << name << " " << show_text(c.text);
      EXPECT_EQ(tok->decode(tok->encode(c.text, true, true)), c.text) << name << " " << show_text(c.text);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, TokenizerVectors,
                         ::testing::Values("deepseek-coder", "deepseek-llm", "falcon", "gpt-2",
                                           "llama-spm", "mpt", "phi-3", "refact", "starcoder"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

TEST(TokenizerVectors, BertIsClearlyUnsupported) {
  Result<Tokenizer> tok = load("bert-bge");
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.message().find("WordPiece tokenizers are not supported yet"), std::string::npos)
      << tok.message();
}

// The vocabs without vectors still load and encode something sensible.
TEST(TokenizerVectors, VocabsWithoutVectorsLoad) {
  for (const char* name : {"baichuan", "gpt-neox"}) {
    Result<Tokenizer> tok = load(name);
    ASSERT_TRUE(tok.ok()) << name << ": " << tok.message();
    const std::vector<int32_t> ids = tok->encode("Hello world", false, false);
    EXPECT_FALSE(ids.empty()) << name;
    EXPECT_EQ(tok->decode(ids), tok->vocab().model == TokenizerModel::Spm ? " Hello world" : "Hello world")
        << name;
  }
}

}  // namespace
}  // namespace th
