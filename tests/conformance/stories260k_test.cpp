// stories260K.gguf reproduces llama2.c's reference greedy output exactly.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/matmul_kernels.h"
#include "kv/kv_cache.h"
#include "format/gguf.h"
#include "model/llama_model.h"
#include "test_backends.h"
#include "test_numeric.h"
#include "test_util.h"

namespace th {
namespace {

std::vector<int32_t> reference_ids() {
  std::ifstream in(test::shared_path("models/stories260K.greedy-from-bos.ids"));
  std::vector<int32_t> ids;
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

using test::argmax;

using test::BackendChoice;

class Stories260KOn : public ::testing::TestWithParam<BackendChoice> {};

TEST_P(Stories260KOn, GreedyFromBosMatchesReferenceIds) {
  Result<GgufFile> f = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(f.ok()) << f.message();
  auto backend = GetParam().make();
  if (!backend) GTEST_SKIP() << "no CUDA device";
  auto model = LlamaModel::load(*f, *backend);
  ASSERT_TRUE(model.ok()) << model.message();
  const ModelConfig& c = (*model)->config();
  auto kv = KvCache::create(*backend, c.n_layer, c.kv_dim(), 20, 16);
  ASSERT_TRUE(kv.ok());
  const std::vector<int32_t> want = reference_ids();
  ASSERT_EQ(want.size(), 256u);

  std::vector<int32_t> table;
  std::vector<int32_t> got;
  std::vector<float> logits;
  int32_t token = 1;  // BOS
  for (int32_t pos = 0; pos < 256; ++pos) {
    ASSERT_TRUE(kv->reserve(table, pos + 1));
    ForwardBatch b;
    b.tables = {table};
    b.add(token, 0, pos, true);
    ASSERT_TRUE((*model)->forward(b, *kv, &logits).ok());
    token = argmax(logits.data(), c.n_vocab);
    got.push_back(token);
  }
  EXPECT_EQ(got, want);
}

// Teacher-forced over the reference sequence: with a lower-precision KV cache the
// model must still predict nearly every reference token, with logits close to f32's.
TEST_P(Stories260KOn, KvCacheTypesStayCloseToF32) {
  Result<GgufFile> f = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(f.ok()) << f.message();
  auto backend = GetParam().make();
  if (!backend) GTEST_SKIP() << "no CUDA device";
  auto model = LlamaModel::load(*f, *backend);
  ASSERT_TRUE(model.ok());
  const ModelConfig& c = (*model)->config();
  std::vector<int32_t> seq = {1};
  for (int32_t id : reference_ids()) seq.push_back(id);
  seq.resize(129);

  auto run = [&](DType type) {
    auto kv = KvCache::create(*backend, c.n_layer, c.kv_dim(), 16, 16, type);
    EXPECT_TRUE(kv.ok()) << kv.message();
    std::vector<int32_t> table;
    EXPECT_TRUE(kv->reserve(table, 128));
    ForwardBatch b;
    b.tables = {table};
    for (int32_t p = 0; p < 128; ++p) b.add(seq[p], 0, p, true);
    std::vector<float> logits;
    EXPECT_TRUE((*model)->forward(b, *kv, &logits).ok());
    return logits;
  };
  const std::vector<float> ref = run(DType::F32);
  for (DType t : {DType::F16, DType::BF16, DType::Q8_0}) {
    const std::vector<float> got = run(t);
    ASSERT_EQ(got.size(), ref.size());
    int agree = 0;
    double max_diff = 0;
    for (int32_t p = 0; p < 128; ++p) {
      const float* g = got.data() + p * c.n_vocab;
      agree += argmax(g, c.n_vocab) == seq[p + 1];
      for (int64_t i = 0; i < c.n_vocab; ++i) max_diff = std::max(max_diff, double(std::abs(g[i] - ref[p * c.n_vocab + i])));
    }
    std::printf("kv %s: agree %d/128, max logit diff %.4f\n", std::string(dtype_name(t)).c_str(), agree, max_diff);
    EXPECT_GE(agree, 124) << dtype_name(t);  // f32 agrees on all 128 (the reference is its greedy output)
    // Measured: f16 0.023, bf16 0.15, q8_0 1.08 (blocks of 32 span 4 of this model's 8-wide heads).
    EXPECT_LT(max_diff, t == DType::F16 ? 0.05 : t == DType::BF16 ? 0.3 : 1.5) << dtype_name(t);
    EXPECT_GT(max_diff, 0.0) << dtype_name(t) << " must actually be stored at lower precision";
  }
  int agree_f32 = 0;
  for (int32_t p = 0; p < 128; ++p) agree_f32 += argmax(ref.data() + p * c.n_vocab, c.n_vocab) == seq[p + 1];
  EXPECT_EQ(agree_f32, 128);

  auto bad = KvCache::create(*backend, c.n_layer, c.kv_dim(), 4, 16, DType::Q4_0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("not supported"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Backends, Stories260KOn, ::testing::ValuesIn(test::every_backend({1, 2})),
                         [](const ::testing::TestParamInfo<BackendChoice>& i) { return i.param.name(); });

}  // namespace
}  // namespace th
