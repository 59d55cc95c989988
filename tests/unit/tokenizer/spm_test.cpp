// spm_encode splits the text where no token can span two symbols; that must
// give exactly what merging the whole text at once gives.
#include "tokenizer/spm_tokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "format/gguf.h"
#include "test_util.h"
#include "tokenizer/vocab.h"

namespace th {
namespace {

TEST(Spm, SplittingAtSpacesChangesNothing) {
  Result<GgufFile> f =
      GgufFile::open(test::shared_path("testdata/tokenizer/llamacpp/ggml-vocab-llama-spm.gguf"));
  ASSERT_TRUE(f.ok()) << f.message();
  Result<VocabData> v = vocab_from_gguf(*f);
  ASSERT_TRUE(v.ok()) << v.message();
  TokenIndex index;
  for (size_t i = 0; i < v->tokens.size(); ++i) index.insert(v->tokens[i], static_cast<int32_t>(i));
  SpmModel split;
  split.index = &index;
  split.scores = &v->scores;
  for (int b = 0; b < 256; ++b) split.byte_tokens[b] = b + 3;
  spm_index_spaces(v->tokens, &split);
  EXPECT_TRUE(split.byte_before_space[0x81]);  // "▁▁" and longer runs
  EXPECT_FALSE(split.byte_before_space['a']);
  SpmModel whole = split;
  whole.byte_before_space.fill(true);  // never split

  const std::string sp = "\xE2\x96\x81";
  std::vector<std::string> texts = {sp + "Hello" + sp + "world", sp + sp + sp + "a" + sp + sp + "b" + sp,
                                    sp + "\xF0\x9F\xA6\x99" + sp + "x\xFF" + sp + "y"};
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {sp, "a", "b", "e", "t", "h", "\xC3\xA9", "\xE6\x88\x91",
                                             "\xFF", "\xE2", "\x81", "1", ".", "<", ">"};
  for (int n = 0; n < 300; ++n) {
    std::string t;
    const int len = std::uniform_int_distribution<int>(0, 40)(rng);
    for (int i = 0; i < len; ++i) t += alphabet[rng() % alphabet.size()];
    texts.push_back(t);
  }
  for (const std::string& t : texts) {
    std::vector<int32_t> a, b;
    spm_encode(split, t, &a);
    spm_encode(whole, t, &b);
    EXPECT_EQ(a, b) << t;
  }
}

}  // namespace
}  // namespace th
