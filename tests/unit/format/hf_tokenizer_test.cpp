// format/hf_tokenizer.h on small SentencePiece-style tokenizer.json files: what it writes
// (the SPM keys, byte and unknown token types) and what it refuses, one clear line each.
#include "format/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <string>

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace th {
namespace {

// "▁" is U+2581. Vocab: <unk>, <0x41> ('A'), ▁, a, b, ▁a, ab, ▁ab.
std::string spm_json(const std::string& normalizer, const std::string& pre = "null",
                     const std::string& merges = R"([["▁", "a"], ["a", "b"], ["▁a", "b"]])") {
  return R"({"normalizer": )" + normalizer + R"(, "pre_tokenizer": )" + pre +
         R"(, "added_tokens": [{"id": 0, "content": "<unk>", "special": true}],
  "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
    "vocab": {"<unk>": 0, "<0x41>": 1, "▁": 2, "a": 3, "b": 4, "▁a": 5, "ab": 6, "▁ab": 7},
    "merges": )" + merges + "}}";
}
const std::string kLlama2 =
    R"({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})";

Result<Tokenizer> load(const std::string& json) {
  HfTokenizerInput in{json, "tokenizer.json", "", "tokenizer_config.json"};
  TH_ASSIGN_OR_RETURN(auto meta, hf_tokenizer_metadata(in));
  TH_ASSIGN_OR_RETURN(GgufFile f, GgufFile::assemble("dir", std::move(meta), {}, {}));
  return Tokenizer::from_gguf(f);
}

TEST(HfTokenizerSpm, MergesByRankWithByteFallback) {
  auto tok = load(spm_json(kLlama2));
  ASSERT_TRUE(tok.ok()) << tok.message();
  EXPECT_EQ(tok->vocab().model, TokenizerModel::Spm);
  EXPECT_TRUE(tok->vocab().add_space_prefix);
  EXPECT_EQ(tok->vocab().unk, 0);
  EXPECT_EQ(tok->vocab().types[1], TokenType::Byte);
  // "ab ab A": ▁ab ▁ab, then ▁ and the byte A; "c" has no byte token: <unk>.
  EXPECT_EQ(tok->encode("ab ab A", false, false), (std::vector<int32_t>{7, 7, 2, 1}));
  EXPECT_EQ(tok->encode("c", false, false), (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(tok->decode({7, 2, 1}), " ab A");
  // Ranks, not scores: with ["a", "b"] first, "▁ab" is ▁ + ab (no merge "▁ ab" is listed).
  auto by_rank = load(spm_json(kLlama2, "null", R"([["a", "b"], ["▁", "a"], ["▁a", "b"]])"));
  ASSERT_TRUE(by_rank.ok()) << by_rank.message();
  EXPECT_EQ(by_rank->encode("ab", false, false), (std::vector<int32_t>{2, 6}));
  // Gemma's form: Replace alone, no space prefix.
  auto gemma = load(spm_json(R"({"type": "Replace", "pattern": {"String": " "}, "content": "▁"})"));
  ASSERT_TRUE(gemma.ok()) << gemma.message();
  EXPECT_FALSE(gemma->vocab().add_space_prefix);
  EXPECT_EQ(gemma->encode("ab ab", false, false), (std::vector<int32_t>{6, 7}));
}

TEST(HfTokenizerSpm, RefusesWhatItCannotServe) {
  auto error = [](const std::string& json) {
    HfTokenizerInput in{json, "tokenizer.json", "", "tokenizer_config.json"};
    auto r = hf_tokenizer_metadata(in);
    return r.ok() ? std::string("ok") : r.message();
  };
  EXPECT_EQ(error(spm_json("null", R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first"})")),
            "tokenizer.json: SentencePiece-style tokenizer with pre_tokenizer 'Metaspace' (supported: none, with the "
            "Prepend/Replace normalizer the converter writes)");
  EXPECT_EQ(error(spm_json("null")),
            "tokenizer.json: SentencePiece-style tokenizer without the normalizer Replace \" \" with \"▁\"");
  EXPECT_EQ(error(spm_json(R"({"type": "Lowercase"})")),
            "tokenizer.json: unsupported normalizer step 'Lowercase' for a SentencePiece-style tokenizer "
            "(supported: Prepend \"▁\", Replace \" \" with \"▁\", NFC)");
  EXPECT_EQ(error(spm_json(kLlama2, "null", R"([["b", "a"]])")),
            "tokenizer.json: model.merges[0] 'b a' does not make a token (or a part holds a space)");
}

}  // namespace
}  // namespace th
