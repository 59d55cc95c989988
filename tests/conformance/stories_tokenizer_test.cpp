// stories260K.gguf's 512-token SentencePiece vocab against llama2.c: its
// tokenizer (tok512.bin) and its encode(), re-implemented here from the
// reference, give the ids independently of our SPM code.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace th {
namespace {

// tok512.bin: int32 max_token_length, then per token: float score, int32 len, bytes.
struct Llama2cTokenizer {
  std::vector<std::string> vocab;
  std::vector<float> scores;
  std::map<std::string, int> lookup;

  bool load(const std::string& path, int n) {
    std::ifstream in(path, std::ios::binary);
    int32_t max_len = 0;
    if (!in.read(reinterpret_cast<char*>(&max_len), 4)) return false;
    for (int i = 0; i < n; ++i) {
      float score;
      int32_t len;
      if (!in.read(reinterpret_cast<char*>(&score), 4) || !in.read(reinterpret_cast<char*>(&len), 4))
        return false;
      std::string s(static_cast<size_t>(len), '\0');
      if (!in.read(s.data(), len)) return false;
      lookup.emplace(s, i);
      vocab.push_back(std::move(s));
      scores.push_back(score);
    }
    return true;
  }

  int find(const std::string& s) const {
    auto it = lookup.find(s);
    return it == lookup.end() ? -1 : it->second;
  }

  // llama2.c run.c encode(): dummy prefix " ", one token per UTF-8 character
  // (bytes + 3 when absent), then merge the best-scoring adjacent pair until none.
  std::vector<int> encode(const std::string& text, bool bos) const {
    std::vector<int> t;
    if (bos) t.push_back(1);
    if (!text.empty()) t.push_back(find(" "));
    for (size_t i = 0; i < text.size();) {
      size_t j = i + 1;
      while (j < text.size() && (static_cast<unsigned char>(text[j]) & 0xC0) == 0x80 && j - i < 4) ++j;
      const std::string ch = text.substr(i, j - i);
      if (int id = find(ch); id >= 0) {
        t.push_back(id);
      } else {
        for (unsigned char c : ch) t.push_back(c + 3);
      }
      i = j;
    }
    for (;;) {
      float best = -1e10f;
      int best_id = -1, best_at = -1;
      for (size_t k = 0; k + 1 < t.size(); ++k) {
        const int id = find(vocab[t[k]] + vocab[t[k + 1]]);
        if (id >= 0 && scores[id] > best) best = scores[id], best_id = id, best_at = static_cast<int>(k);
      }
      if (best_at < 0) break;
      t[best_at] = best_id;
      t.erase(t.begin() + best_at + 1);
    }
    return t;
  }
};

class Stories : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<GgufFile> f = GgufFile::open(test::shared_path("models/stories260K.gguf"));
    ASSERT_TRUE(f.ok()) << f.message();
    Result<Tokenizer> t = Tokenizer::from_gguf(*f);
    ASSERT_TRUE(t.ok()) << t.message();
    tok_ = std::make_unique<Tokenizer>(std::move(t).value());
    ASSERT_EQ(tok_->n_vocab(), 512);
    ASSERT_TRUE(ref_.load(test::shared_path("models/tok512.bin"), 512));
  }
  std::unique_ptr<Tokenizer> tok_;
  Llama2cTokenizer ref_;
};

TEST_F(Stories, OnceUponATime) {
  const std::vector<int32_t> ids = tok_->encode("Once upon a time", /*add_special=*/true, false);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 403, 407, 261, 378}));  // <s> ▁Once ▁upon ▁a ▁time
  const std::vector<int> ref = ref_.encode("Once upon a time", true);
  EXPECT_EQ(std::vector<int32_t>(ref.begin(), ref.end()), ids);
  EXPECT_EQ(tok_->decode(ids), "Once upon a time");
}

TEST_F(Stories, AgreesWithLlama2c) {
  for (const std::string text :
       {"Once upon a time, there was a little girl named Lily.", "She liked to play outside.",
        "\"Hello!\" said Tom. 123 + 4 = 127", "Hello\nworld \xE6\x88\x91 \xF0\x9F\xA6\x99",
        "  two leading spaces", "tab\there", "a", ""}) {
    const std::vector<int32_t> ids = tok_->encode(text, true, false);
    const std::vector<int> ref = ref_.encode(text, true);
    EXPECT_EQ(std::vector<int32_t>(ref.begin(), ref.end()), ids) << "'" << text << "'";
    EXPECT_EQ(tok_->decode(ids), text);
  }
}

// The reference story decodes to its published text.
TEST_F(Stories, GreedyReferenceDecodes) {
  std::ifstream ids_in(test::shared_path("models/stories260K.greedy-from-bos.ids"));
  std::vector<int32_t> ids{1};
  for (int32_t id; ids_in >> id;) ids.push_back(id);
  ASSERT_EQ(ids.size(), 257u);
  std::ifstream txt_in(test::shared_path("models/stories260K.greedy-from-bos.txt"), std::ios::binary);
  const std::string want((std::istreambuf_iterator<char>(txt_in)), std::istreambuf_iterator<char>());
  const std::string got = tok_->decode(ids);
  // The .txt may end with a newline the ids do not produce.
  EXPECT_EQ(got, want.substr(0, got.size()));
  EXPECT_GE(got.size() + 1, want.size());
  Detokenizer d(*tok_);
  std::string streamed;
  for (int32_t id : ids) streamed += d.push(id);
  streamed += d.flush();
  EXPECT_EQ(streamed, got);
}

}  // namespace
}  // namespace th
