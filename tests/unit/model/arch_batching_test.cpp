// Every architecture gives a token the same logits whatever else is in its
// batch: sequences prefilled and decoded together in ragged batches (experts
// then see tokens of several sequences at once; sliding windows and block
// tables differ per sequence) equal each sequence run alone, bit for bit, on
// the CPU backend (each dot product is computed the same way whatever the batch);
// and quantized expert and fused tensors are sliced where their f32 copies are.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/backend.h"
#include "format/gguf.h"
#include "kv/kv_cache.h"
#include "model/llama_model.h"
#include "model/synthetic_model.h"
#include "tensor/quant.h"
#include "test_util.h"

namespace th {
namespace {

// Logits of every decode step (prompt's last token, then `steps` fed tokens) of each
// sequence, all sequences in each forward pass when together, else one at a time.
std::vector<std::vector<float>> run(LlamaModel& m, Backend& b, const std::vector<std::vector<int32_t>>& seqs,
                                    size_t prompt_len, bool together) {
  const ModelConfig& c = m.config();
  std::vector<std::vector<float>> out(seqs.size());
  auto step_all = [&](const std::vector<size_t>& which) {
    auto kv = KvCache::create(b, c.n_layer, c.kv_dim(), 64, 4);
    std::vector<std::vector<int32_t>> tables(seqs.size());
    for (size_t s : which) EXPECT_TRUE(kv->reserve(tables[s], static_cast<int64_t>(seqs[s].size())));
    std::vector<float> logits;
    for (size_t end = prompt_len; end <= seqs[0].size(); ++end) {
      ForwardBatch fb;
      fb.tables.assign(tables.begin(), tables.end());
      const size_t begin = end == prompt_len ? 0 : end - 1;
      for (size_t s : which)
        for (size_t p = begin; p < end; ++p)
          fb.add(seqs[s][p], static_cast<int32_t>(s), static_cast<int32_t>(p), p + 1 == end);
      EXPECT_TRUE(m.forward(fb, *kv, &logits).ok());
      for (size_t i = 0; i < which.size(); ++i)
        out[which[i]].insert(out[which[i]].end(), logits.begin() + static_cast<int64_t>(i) * c.n_vocab,
                             logits.begin() + static_cast<int64_t>(i + 1) * c.n_vocab);
    }
  };
  if (together) {
    std::vector<size_t> all;
    for (size_t s = 0; s < seqs.size(); ++s) all.push_back(s);
    step_all(all);
  } else {
    for (size_t s = 0; s < seqs.size(); ++s) step_all({s});
  }
  return out;
}

TEST(ArchBatching, TogetherEqualsAloneForEveryArchitecture) {
  Result<GgufFile> vocab = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(vocab.ok()) << vocab.message();
  // Equal lengths (the helper steps all sequences in lockstep), prompts of 9, 3 decode steps.
  const std::vector<std::vector<int32_t>> seqs = {{1, 400, 37, 291, 88, 503, 12, 250, 77, 431, 5, 160},
                                                  {1, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30},
                                                  {1, 431, 5, 160, 333, 94, 470, 201, 9, 8, 7, 6}};
  for (const std::string arch : {"llama", "llama3", "mixtral", "qwen2", "qwen3", "qwen3moe", "gemma2", "gemma3", "phi3"}) {
    SCOPED_TRACE(arch);
    SyntheticSpec spec;
    spec.shape = *synthetic_shape("tiny");
    spec.type = DType::F32;
    ASSERT_TRUE(apply_synthetic_arch(arch, spec).ok());
    const std::string path = test::temp_path("arch_batching_" + arch + ".gguf");
    ASSERT_TRUE(write_synthetic_model(spec, *vocab, path).ok());
    Result<GgufFile> f = GgufFile::open(path);
    ASSERT_TRUE(f.ok()) << f.message();
    CpuBackendOptions o;
    o.n_threads = 2;
    std::unique_ptr<Backend> b = make_cpu_backend(o);
    auto m = LlamaModel::load(*f, *b);
    ASSERT_TRUE(m.ok()) << m.message();
    const auto together = run(**m, *b, seqs, 9, true);
    const auto alone = run(**m, *b, seqs, 9, false);
    for (size_t s = 0; s < seqs.size(); ++s) {
      ASSERT_EQ(together[s].size(), 4u * 512u);
      EXPECT_EQ(together[s], alone[s]) << "sequence " << s;
    }
    std::remove(path.c_str());
  }
}

// Quantized experts and fused tensors are sliced at whole rows: a q8_0 model and the same
// model with every tensor dequantized to f32 give bit-identical logits on the reference
// backend (it dequantizes each row exactly so and sums in f64), so every slice's offset is right.
TEST(ArchBatching, QuantizedSlicesEqualTheirDequantizedCopy) {
  Result<GgufFile> vocab = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(vocab.ok()) << vocab.message();
  for (const std::string arch : {"mixtral", "qwen3moe", "phi3"}) {
    SCOPED_TRACE(arch);
    SyntheticSpec spec;
    spec.shape = *synthetic_shape("tiny");
    spec.type = DType::Q8_0;
    ASSERT_TRUE(apply_synthetic_arch(arch, spec).ok());
    const std::string path = test::temp_path("arch_q8_" + arch + ".gguf");
    ASSERT_TRUE(write_synthetic_model(spec, *vocab, path).ok());
    Result<GgufFile> q = GgufFile::open(path);
    ASSERT_TRUE(q.ok()) << q.message();
    GgufWriter w;
    for (const auto& [k, v] : q->metadata()) w.add(k, v);
    bool any_quantized = false;
    for (const GgufTensor& t : q->tensors()) {
      std::vector<float> f(static_cast<size_t>(t.n_elements()));
      const int64_t cols = t.dims[0], rows = t.n_elements() / cols;
      for (int64_t r = 0; r < rows; ++r)
        dequantize_row(t.type, static_cast<const uint8_t*>(t.data) + static_cast<size_t>(r) * row_bytes(t.type, cols),
                       f.data() + r * cols, cols);
      any_quantized |= t.type == DType::Q8_0;
      w.add_tensor(t.name, t.dims, DType::F32, f.data(), f.size() * sizeof(float));
    }
    ASSERT_TRUE(any_quantized);
    std::vector<uint8_t> bytes = w.to_bytes();
    Result<GgufFile> d = GgufFile::parse(bytes.data(), bytes.size());
    ASSERT_TRUE(d.ok()) << d.message();
    std::unique_ptr<Backend> b = make_reference_backend();
    auto mq = LlamaModel::load(*q, *b);
    auto md = LlamaModel::load(*d, *b);
    ASSERT_TRUE(mq.ok() && md.ok());
    const std::vector<std::vector<int32_t>> seqs = {{1, 400, 37, 291, 88, 503, 12, 250}};
    EXPECT_EQ(run(**mq, *b, seqs, 6, false), run(**md, *b, seqs, 6, false));
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace th
