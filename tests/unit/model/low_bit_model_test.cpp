// Models of the low-bit types (q2_K, q3_K, iq4_nl, iq4_xs), written by mkmodel's writer:
// they load, and the fast CPU backend (the new kernels, activations quantized to 8 bits)
// gives the reference backend's logits (dequantized weights, f32 activations, f64 sums)
// up to the activation quantization.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "format/gguf.h"
#include "kv/kv_cache.h"
#include "model/llama_model.h"
#include "model/synthetic_model.h"
#include "test_util.h"

namespace th {
namespace {

// The last position's logits of `prompt`, fed one forward pass per token.
std::vector<float> last_logits(LlamaModel& m, Backend& b, const std::vector<int32_t>& prompt) {
  const ModelConfig& c = m.config();
  auto kv = KvCache::create(b, c.n_layer, c.kv_dim(), 16, 4);
  EXPECT_TRUE(kv.ok());
  std::vector<int32_t> table;
  std::vector<float> logits;
  for (size_t i = 0; i < prompt.size(); ++i) {
    EXPECT_TRUE(kv->reserve(table, static_cast<int64_t>(i) + 1));
    ForwardBatch fb;
    fb.tables = {table};
    fb.add(prompt[i], 0, static_cast<int32_t>(i), i + 1 == prompt.size());
    EXPECT_TRUE(m.forward(fb, *kv, &logits).ok());
  }
  return logits;
}

class LowBitModel : public ::testing::TestWithParam<DType> {
 protected:
  void TearDown() override { ::unlink(path_.c_str()); }
  std::string path_;
};

TEST_P(LowBitModel, FastBackendGivesTheReferenceLogits) {
  const DType type = GetParam();
  SyntheticSpec spec;
  spec.shape = {"tiny", 256, 2, 4, 2, 512, 256};  // rows a multiple of the 256-element super-blocks
  spec.type = type;
  spec.tied_output = true;  // the embedding (in `type`) is the output matrix too: one 32000-row matrix
  Result<GgufFile> vocab = GgufFile::open(test::shared_path("testdata/tokenizer/llamacpp/ggml-vocab-llama-spm.gguf"));
  ASSERT_TRUE(vocab.ok()) << vocab.message();
  path_ = test::temp_path("lowbit_" + std::string(dtype_name(type)) + ".gguf");
  ASSERT_TRUE(write_synthetic_model(spec, *vocab, path_).ok());
  Result<GgufFile> f = GgufFile::open(path_);
  ASSERT_TRUE(f.ok()) << f.message();
  ASSERT_NE(f->tensor("token_embd.weight"), nullptr);
  EXPECT_EQ(f->tensor("token_embd.weight")->type, type);

  std::unique_ptr<Backend> fast = make_cpu_backend(), ref = make_reference_backend();
  auto mf = LlamaModel::load(*f, *fast);
  auto mr = LlamaModel::load(*f, *ref);
  ASSERT_TRUE(mf.ok()) << mf.message();
  ASSERT_TRUE(mr.ok()) << mr.message();
  const std::vector<int32_t> prompt = {1, 450, 4996, 17354, 1701};
  const std::vector<float> got = last_logits(**mf, *fast, prompt), want = last_logits(**mr, *ref, prompt);
  ASSERT_EQ(got.size(), want.size());
  // Each matmul's input is rounded to 8-bit blocks (up to 1/254 of the block maximum per
  // element); through the 2 layers' 7 matmuls and the output matrix that moved the largest
  // logit difference to 1.4-2.1% of the largest |logit| (about 4; measured for the four types,
  // untied). 5% leaves room for other seeds, and stays far below what a wrong level, scale or
  // layout gives: errors of the order of the logits themselves.
  double max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << i;
    max_abs = std::max(max_abs, std::fabs(double(want[i])));
    max_diff = std::max(max_diff, std::fabs(double(got[i]) - want[i]));
  }
  EXPECT_GT(max_abs, 0.0);
  EXPECT_LE(max_diff, 0.05 * max_abs) << dtype_name(type) << ": largest |logit| " << max_abs;
}

INSTANTIATE_TEST_SUITE_P(Types, LowBitModel, ::testing::Values(DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtype_name(i.param)); });

}  // namespace
}  // namespace th
