// stories260K.gguf reproduces llama2.c's reference greedy output exactly.
#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "backend/backend.h"
#include "kv/kv_cache.h"
#include "model/gguf.h"
#include "model/llama_model.h"
#include "test_util.h"

namespace th {
namespace {

std::vector<int32_t> reference_ids() {
  std::ifstream in(test::shared_path("models/stories260K.greedy-from-bos.ids"));
  std::vector<int32_t> ids;
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

int32_t argmax(const float* v, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = static_cast<int32_t>(i);
  return best;
}

TEST(Stories260K, GreedyFromBosMatchesReferenceIds) {
  Result<GgufFile> f = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(f.ok()) << f.message();
  auto backend = make_cpu_backend();
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

}  // namespace
}  // namespace th
