// Special-token splitting, pieces, the decoding convention and end-of-generation
// tokens, on llama.cpp's vocab files and on small hand-made vocabs.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include "format/gguf.h"
#include "test_util.h"

namespace th {
namespace {

Tokenizer load(const std::string& name) {
  Result<GgufFile> f =
      GgufFile::open(test::shared_path("testdata/tokenizer/llamacpp/ggml-vocab-" + name + ".gguf"));
  EXPECT_TRUE(f.ok()) << f.message();
  Result<Tokenizer> t = Tokenizer::from_gguf(*f);
  EXPECT_TRUE(t.ok()) << t.message();
  return std::move(t).value();
}

std::vector<int32_t> join(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(SpecialTokens, ControlTokensOnlyWithParseSpecial) {
  const Tokenizer t = load("gpt-2");
  const auto a = t.encode("Hi", false, false), b = t.encode(" there", false, false);
  EXPECT_EQ(t.encode("Hi<|endoftext|> there", false, true), join({a, {50256}, b}));
  const auto plain = t.encode("Hi<|endoftext|> there", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 50256), 0);
  EXPECT_EQ(t.decode(plain), "Hi<|endoftext|> there");
  // A special token's text renders only on request.
  EXPECT_EQ(t.decode(join({a, {50256}, b})), "Hi there");
  EXPECT_EQ(t.decode(join({a, {50256}, b}), /*render_special=*/true), "Hi<|endoftext|> there");
}

TEST(SpecialTokens, SpmAddsTheDummySpaceAfterEachSpecialToken) {
  const Tokenizer t = load("llama-spm");
  const auto hi = t.encode("Hi", false, false);  // "▁Hi"
  EXPECT_EQ(t.encode("<s>Hi</s>", false, true), join({{1}, hi, {2}}));
  EXPECT_EQ(t.encode("Hi", true, false), join({{1}, hi}));
  const auto plain = t.encode("<s>Hi</s>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1) + std::count(plain.begin(), plain.end(), 2), 0);
}

TEST(SpecialTokens, UserDefinedTokensAreAlwaysSplitOut) {
  const Tokenizer t = load("phi-3");  // its "</s>" is user-defined
  EXPECT_EQ(t.encode("a</s>b", false, false),
            join({t.encode("a", false, false), {2}, t.encode("b", false, false)}));
  // Control tokens are not, without parse_special.
  const auto plain = t.encode("a<|end|>b", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 32007), 0);
  EXPECT_EQ(t.encode("a<|end|>b", false, true),
            join({t.encode("a", false, false), {32007}, t.encode("b", false, false)}));
}

VocabData specials_vocab() {
  VocabData v;
  v.model = TokenizerModel::Bpe;
  v.pre = "gpt-2";
  v.tokens = {"W", "X", "Y", "Z", "XYZ", "XY", "YZW"};
  v.types = {TokenType::Normal,      TokenType::Normal,      TokenType::Normal,
             TokenType::Normal,      TokenType::UserDefined, TokenType::UserDefined,
             TokenType::UserDefined};
  v.add_bos = false;
  v.add_space_prefix = false;
  return v;
}

TEST(SpecialTokens, LongestFirstThenLeftmost) {
  Result<Tokenizer> t = Tokenizer::create(specials_vocab());
  ASSERT_TRUE(t.ok()) << t.message();
  // XYZ and YZW are as long; XYZ (lower id) goes first and takes the Y and Z.
  EXPECT_EQ(t->encode("XYZW", false, false), (std::vector<int32_t>{4, 0}));
  EXPECT_EQ(t->encode("WXYZW", false, false), (std::vector<int32_t>{0, 4, 0}));
  EXPECT_EQ(t->encode("XYW", false, false), (std::vector<int32_t>{5, 0}));
  EXPECT_EQ(t->encode("XYZXYZ", false, false), (std::vector<int32_t>{4, 4}));
  EXPECT_EQ(t->encode("YZWXY", false, false), (std::vector<int32_t>{6, 5}));
}

TEST(Pieces, SpmPieces) {
  const Tokenizer t = load("llama-spm");
  EXPECT_EQ(t.token_to_piece(13), "\n");   // <0x0A>
  EXPECT_EQ(t.token_to_piece(29871), " ");  // ▁
  EXPECT_EQ(t.token_to_piece(1), "");
  EXPECT_EQ(t.token_to_piece(1, true), "<s>");
  EXPECT_EQ(t.token_to_piece(-1), "");
  EXPECT_EQ(t.token_to_piece(32000), "");
}

TEST(Pieces, BpePieces) {
  const Tokenizer t = load("gpt-2");
  EXPECT_EQ(t.token_to_piece(t.encode(" world", false, false).at(0)), " world");
  EXPECT_EQ(t.token_to_piece(198), "\n");  // Ċ
}

TEST(Decode, DropsTheDummySpaceOnlyAfterBos) {
  const Tokenizer t = load("llama-spm");
  const auto with_bos = t.encode("Hello world", true, false);
  ASSERT_EQ(with_bos.at(0), 1);
  EXPECT_EQ(t.decode(with_bos), "Hello world");
  EXPECT_EQ(t.decode(with_bos, true), "<s>Hello world");
  EXPECT_EQ(t.decode(t.encode("Hello world", false, false)), " Hello world");
  EXPECT_EQ(t.decode({1, 15043, 1, 15043}), "HelloHello");  // ▁Hello after each BOS
}

TEST(EndOfGeneration, FromEosAndKnownTexts) {
  const Tokenizer gpt2 = load("gpt-2");
  EXPECT_TRUE(gpt2.is_eog(50256));
  EXPECT_FALSE(gpt2.is_eog(0));
  EXPECT_FALSE(gpt2.is_eog(-1));
  const Tokenizer phi3 = load("phi-3");
  EXPECT_TRUE(phi3.is_eog(32000));  // eos, <|endoftext|>
  EXPECT_TRUE(phi3.is_eog(32007));  // <|end|>
  EXPECT_FALSE(phi3.is_eog(2));
  const Tokenizer spm = load("llama-spm");
  EXPECT_TRUE(spm.is_eog(2));
  EXPECT_FALSE(spm.is_eog(1));
}

TEST(Encode, EmptyAndAddSpecial) {
  const Tokenizer spm = load("llama-spm");
  EXPECT_TRUE(spm.encode("", false, false).empty());
  EXPECT_EQ(spm.encode("", true, false), (std::vector<int32_t>{1}));
  const Tokenizer gpt2 = load("gpt-2");
  EXPECT_TRUE(gpt2.encode("", true, true).empty());  // gpt-2 adds no BOS
}

TEST(Encode, InvalidUtf8) {
  const Tokenizer gpt2 = load("gpt-2");
  // Byte-level BPE sees U+FFFD for a bad byte, as llama.cpp does.
  EXPECT_EQ(gpt2.encode("a\xFF" "b", false, false),
            gpt2.encode("a\xEF\xBF\xBD" "b", false, false));
  const Tokenizer spm = load("llama-spm");
  // SPM keeps the raw bytes: they come back through byte tokens.
  EXPECT_EQ(spm.decode(spm.encode("a\xFF" "b", true, false)), "a\xFF" "b");
}

}  // namespace
}  // namespace th
