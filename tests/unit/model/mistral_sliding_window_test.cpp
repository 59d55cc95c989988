// Mistral's sliding window (llama.attention.sliding_window, config.json's sliding_window) on
// every layer of a llama model: a query sees only the last `window` positions. mkmodel's tiny
// mistral has window 5 and 2 layers, so position p depends on tokens p - 8 .. p only (each
// layer reaches 4 back): changing tokens 0 and 1 leaves the logits of positions 10 and on
// bit for bit, while the same weights without the window see every token.
#include <gtest/gtest.h>

#include <memory>
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

constexpr int32_t kLen = 16;

// Logits (n_vocab per position, every position) of `ids` through the tiny mistral, or the same
// file without its llama.attention.sliding_window key.
std::vector<float> run(bool window, const std::vector<int32_t>& ids, int64_t* n_vocab, ModelConfig* cfg_out) {
  SyntheticSpec spec;
  spec.shape = *synthetic_shape("tiny");
  spec.type = DType::F32;
  spec.seed = 11;
  EXPECT_TRUE(apply_synthetic_arch("mistral", spec).ok());
  Result<GgufFile> vocab = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  EXPECT_TRUE(vocab.ok());
  const std::string path = test::temp_path("mistral_swa.gguf");
  EXPECT_TRUE(write_synthetic_model(spec, *vocab, path).ok());
  Result<GgufFile> src = GgufFile::open(path);
  EXPECT_TRUE(src.ok());
  GgufWriter w;
  for (const auto& [k, v] : src->metadata())
    if (window || k != "llama.attention.sliding_window") w.add(k, v);
  for (const GgufTensor& t : src->tensors()) w.add_tensor(t.name, t.dims, t.type, t.data, t.nbytes);
  const std::vector<uint8_t> bytes = w.to_bytes();
  std::remove(path.c_str());
  Result<GgufFile> g = GgufFile::parse(bytes.data(), bytes.size());
  EXPECT_TRUE(g.ok());
  std::unique_ptr<Backend> b = make_cpu_backend();
  auto m = LlamaModel::load(*g, *b);
  EXPECT_TRUE(m.ok()) << m.message();
  std::vector<float> logits;
  if (!m.ok()) return logits;
  const ModelConfig& c = (*m)->config();
  *n_vocab = c.n_vocab;
  *cfg_out = c;
  auto kv = KvCache::create(*b, c.n_layer, c.kv_dim(), 8, 4);
  std::vector<int32_t> table;
  EXPECT_TRUE(kv->reserve(table, kLen));
  ForwardBatch fb;
  fb.tables = {table};
  for (int32_t p = 0; p < kLen; ++p) fb.add(ids[static_cast<size_t>(p)], 0, p, true);
  EXPECT_TRUE((*m)->forward(fb, *kv, &logits).ok());
  return logits;
}

TEST(MistralSlidingWindow, AttentionBeyondTheWindowIsMasked) {
  std::vector<int32_t> a, b;
  for (int32_t p = 0; p < kLen; ++p) a.push_back(3 + (p * 37) % 500);
  b = a;
  b[0] = 7;
  b[1] = 400;
  int64_t nv = 0;
  ModelConfig cfg;
  const std::vector<float> la = run(true, a, &nv, &cfg), lb = run(true, b, &nv, &cfg);
  ASSERT_EQ(la.size(), static_cast<size_t>(kLen * nv));
  EXPECT_EQ(cfg.sliding_window, 5);
  for (int64_t l = 0; l < cfg.n_layer; ++l) EXPECT_TRUE(cfg.is_swa(l)) << "layer " << l;
  auto row = [&](const std::vector<float>& v, int p) {
    return std::vector<float>(v.begin() + p * nv, v.begin() + (p + 1) * nv);
  };
  for (int p = 1; p < 9; ++p) EXPECT_NE(row(la, p), row(lb, p)) << "position " << p << " sees token 0 or 1";
  for (int p = 10; p < kLen; ++p) EXPECT_EQ(row(la, p), row(lb, p)) << "position " << p << " is past the window";

  // Without the window, the last position still sees the first tokens.
  const std::vector<float> na = run(false, a, &nv, &cfg), nb = run(false, b, &nv, &cfg);
  EXPECT_EQ(cfg.sliding_window, 0);
  EXPECT_NE(row(na, kLen - 1), row(nb, kLen - 1));
  EXPECT_EQ(row(na, 2), row(la, 2));  // inside the window the two agree (the same RoPE: base 1e6 in both)
}

}  // namespace
}  // namespace th
