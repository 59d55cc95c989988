#include "model/llama_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include <unistd.h>

#include "backend/cpu/matmul_kernels.h"
#include "format/gguf.h"
#include "model/synthetic_model.h"
#include "test_backends.h"
#include "test_numeric.h"
#include "test_util.h"

namespace th {
namespace {

using test::argmax;

struct Loaded {
  GgufFile file;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<LlamaModel> model;
};

Loaded load(const std::string& path, std::unique_ptr<Backend> backend = make_cpu_backend()) {
  Loaded l;
  Result<GgufFile> f = GgufFile::open(path);
  EXPECT_TRUE(f.ok()) << f.message();
  l.file = std::move(f).value();
  l.backend = std::move(backend);
  auto m = LlamaModel::load(l.file, *l.backend);
  EXPECT_TRUE(m.ok()) << m.message();
  if (m.ok()) l.model = std::move(m).value();
  return l;
}

// Greedy continuation of `prompt` for n tokens, one sequence alone, token by token.
std::vector<int32_t> greedy_alone(LlamaModel& m, Backend& b, const std::vector<int32_t>& prompt, int n) {
  const ModelConfig& c = m.config();
  auto kv = KvCache::create(b, c.n_layer, c.kv_dim(), 64, 4);
  std::vector<int32_t> table, out;
  std::vector<float> logits;
  std::vector<int32_t> seq = prompt;
  for (size_t i = 0; out.size() < static_cast<size_t>(n); ++i) {
    EXPECT_TRUE(kv->reserve(table, static_cast<int64_t>(i) + 1));
    ForwardBatch fb;
    fb.tables = {table};
    fb.add(seq[i], 0, static_cast<int32_t>(i), i + 1 == seq.size());
    EXPECT_TRUE(m.forward(fb, *kv, &logits).ok());
    if (i + 1 == seq.size()) {
      out.push_back(argmax(logits.data(), c.n_vocab));
      seq.push_back(out.back());
    }
  }
  return out;
}

// The same sequences served together: prompts prefilled in one ragged batch,
// then every decode step of every sequence in one forward pass.
std::vector<std::vector<int32_t>> greedy_together(LlamaModel& m, Backend& b,
                                                  const std::vector<std::vector<int32_t>>& prompts, int n) {
  const ModelConfig& c = m.config();
  auto kv = KvCache::create(b, c.n_layer, c.kv_dim(), 128, 4);
  const size_t S = prompts.size();
  std::vector<std::vector<int32_t>> tables(S), outs(S), seqs = prompts;
  std::vector<float> logits;
  ForwardBatch fb;
  for (size_t s = 0; s < S; ++s) {
    EXPECT_TRUE(kv->reserve(tables[s], static_cast<int64_t>(prompts[s].size())));
    for (size_t p = 0; p < prompts[s].size(); ++p)
      fb.add(prompts[s][p], static_cast<int32_t>(s), static_cast<int32_t>(p), p + 1 == prompts[s].size());
  }
  for (int step = 0; step < n; ++step) {
    fb.tables.assign(tables.begin(), tables.end());
    EXPECT_TRUE(m.forward(fb, *kv, &logits).ok());
    fb = ForwardBatch();
    for (size_t s = 0; s < S; ++s) {
      const int32_t tok = argmax(logits.data() + s * c.n_vocab, c.n_vocab);
      outs[s].push_back(tok);
      const int32_t pos = static_cast<int32_t>(seqs[s].size());
      seqs[s].push_back(tok);
      EXPECT_TRUE(kv->reserve(tables[s], pos + 1));
      fb.add(tok, static_cast<int32_t>(s), pos, true);
    }
  }
  return outs;
}

using test::BackendChoice;

class LlamaModelOn : public ::testing::TestWithParam<BackendChoice> {};

TEST_P(LlamaModelOn, BatchedGreedyEqualsEachAlone) {
  std::unique_ptr<Backend> backend = GetParam().make();
  if (!backend) GTEST_SKIP() << "no CUDA device";
  Loaded l = load(test::shared_path("models/stories260K.gguf"), std::move(backend));
  ASSERT_TRUE(l.model);
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 403, 407, 261, 378}, {1}, {1, 73, 36, 322, 263, 405, 280, 262, 374, 265, 394, 262}};
  const auto together = greedy_together(*l.model, *l.backend, prompts, 24);
  for (size_t s = 0; s < prompts.size(); ++s)
    EXPECT_EQ(together[s], greedy_alone(*l.model, *l.backend, prompts[s], 24)) << "sequence " << s;
}

INSTANTIATE_TEST_SUITE_P(Backends, LlamaModelOn, ::testing::ValuesIn(test::every_backend({1, 2, 3})),
                         [](const ::testing::TestParamInfo<BackendChoice>& i) { return i.param.name(); });

class SyntheticModel : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const std::string& p : written_) ::unlink(p.c_str());
  }
  std::vector<std::string> written_;

  std::string write(Arch arch, DType type, bool tied) {
    SyntheticSpec spec;
    spec.shape = {"tiny", 64, 2, 4, 2, 96, 256};
    spec.arch = arch;
    spec.type = type;
    spec.tied_output = tied;
    Result<GgufFile> vocab = GgufFile::open(test::shared_path("testdata/tokenizer/llamacpp/ggml-vocab-llama-spm.gguf"));
    EXPECT_TRUE(vocab.ok()) << vocab.message();
    // Named per test: ctest runs tests in parallel, and rewriting a file another test has mapped is SIGBUS.
    const std::string test_name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    const std::string path = test::temp_path("synth_" + test_name) + "_" + std::to_string(static_cast<int>(arch)) + "_" +
                             std::string(dtype_name(type)) + (tied ? "_tied" : "") + ".gguf";
    written_.push_back(path);
    Status s = write_synthetic_model(spec, *vocab, path);
    EXPECT_TRUE(s.ok()) << s.message();
    return path;
  }
};

TEST_F(SyntheticModel, LoadsAndGivesFiniteLogitsInEveryConfiguration) {
  for (Arch arch : {Arch::Llama, Arch::Qwen2}) {
    for (bool tied : {false, true}) {
      Loaded l = load(write(arch, DType::F16, tied));
      ASSERT_TRUE(l.model);
      EXPECT_EQ(l.model->config().n_vocab, 32000);
      EXPECT_EQ(l.model->config().rope_neox, arch == Arch::Qwen2);
      const auto out = greedy_alone(*l.model, *l.backend, {1, 100, 200, 300}, 8);
      EXPECT_EQ(out.size(), 8u);
      auto kv = KvCache::create(*l.backend, 2, l.model->config().kv_dim(), 4, 4);
      std::vector<int32_t> table;
      ASSERT_TRUE(kv->reserve(table, 1));
      ForwardBatch fb;
      fb.tables = {table};
      fb.add(5, 0, 0, true);
      std::vector<float> logits;
      ASSERT_TRUE(l.model->forward(fb, *kv, &logits).ok());
      for (float x : logits) ASSERT_TRUE(std::isfinite(x));
    }
  }
}

TEST_F(SyntheticModel, Qwen2BiasesAreApplied) {
  // The same qwen2 model with its q/k/v biases zeroed must continue differently.
  const std::string path = write(Arch::Qwen2, DType::F16, false);
  Loaded q = load(path);
  ASSERT_TRUE(q.model);
  GgufWriter w;
  for (const auto& [k, v] : q.file.metadata()) w.add(k, v);
  std::vector<uint8_t> zeros;
  for (const GgufTensor& t : q.file.tensors()) {
    const bool bias = t.name.find(".bias") != std::string::npos;
    zeros.assign(t.nbytes, 0);
    w.add_tensor(t.name, t.dims, t.type, bias ? zeros.data() : t.data, t.nbytes);
  }
  const std::string zeroed = path + ".nobias.gguf";
  written_.push_back(zeroed);
  ASSERT_TRUE(w.write(zeroed).ok());
  Loaded z = load(zeroed);
  ASSERT_TRUE(z.model);
  EXPECT_NE(greedy_alone(*q.model, *q.backend, {1, 7, 8, 9}, 6), greedy_alone(*z.model, *z.backend, {1, 7, 8, 9}, 6));
}

TEST_F(SyntheticModel, RopeFrequencyFactorsAreApplied) {
  // rope_freqs.weight (Llama 3.1's scaling) divides each frequency: factors of 1 change
  // nothing, Llama 3.1's factors change the continuation.
  const std::string path = write(Arch::Llama, DType::F16, false);
  Loaded plain = load(path);
  ASSERT_TRUE(plain.model);
  const int64_t half = plain.model->config().rope_dim / 2;
  auto write_factors = [&](const std::vector<float>& factors, const std::string& suffix) {
    GgufWriter w;
    for (const auto& [k, v] : plain.file.metadata()) w.add(k, v);
    for (const GgufTensor& t : plain.file.tensors()) w.add_tensor(t.name, t.dims, t.type, t.data, t.nbytes);
    w.add_tensor("rope_freqs.weight", {static_cast<int64_t>(factors.size())}, DType::F32, factors.data(),
                 factors.size() * sizeof(float));
    const std::string out = path + suffix;
    written_.push_back(out);
    EXPECT_TRUE(w.write(out).ok());
    return out;
  };
  Loaded ones = load(write_factors(std::vector<float>(static_cast<size_t>(half), 1.0f), ".ones.gguf"));
  Loaded scaled = load(write_factors(llama3_rope_freq_factors(2 * half, 10000.0f, 8.0f, 1.0f, 4.0f, 16), ".l3.gguf"));
  ASSERT_TRUE(ones.model && scaled.model);
  const std::vector<int32_t> prompt = {1, 50, 60, 70, 80, 90, 100, 110};
  const auto base = greedy_alone(*plain.model, *plain.backend, prompt, 12);
  EXPECT_EQ(greedy_alone(*ones.model, *ones.backend, prompt, 12), base);
  EXPECT_NE(greedy_alone(*scaled.model, *scaled.backend, prompt, 12), base);
  Result<GgufFile> bad = GgufFile::open(write_factors(std::vector<float>(3, 1.0f), ".bad.gguf"));
  ASSERT_TRUE(bad.ok());
  auto m = LlamaModel::load(*bad, *plain.backend);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("'rope_freqs.weight' has 3 elements"), std::string::npos) << m.message();
}

TEST(LlamaModel, RejectsMissingTensorsAndBadShapes) {
  Result<GgufFile> src = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(src.ok());
  auto rebuild = [&](const std::string& skip, const std::string& reshape) {
    GgufWriter w;
    for (const auto& [k, v] : src->metadata()) w.add(k, v);
    for (const GgufTensor& t : src->tensors()) {
      if (t.name == skip) continue;
      std::vector<int64_t> dims = t.dims;
      if (t.name == reshape) std::swap(dims[0], dims[1]);
      w.add_tensor(t.name, dims, t.type, t.data, t.nbytes);
    }
    return w.to_bytes();
  };
  auto backend = make_cpu_backend();
  {
    auto bytes = rebuild("blk.3.ffn_up.weight", "");
    auto f = GgufFile::parse(bytes.data(), bytes.size());
    ASSERT_TRUE(f.ok());
    auto m = LlamaModel::load(*f, *backend);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.message().find("missing tensor 'blk.3.ffn_up.weight'"), std::string::npos) << m.message();
  }
  {
    auto bytes = rebuild("", "blk.1.attn_k.weight");
    auto f = GgufFile::parse(bytes.data(), bytes.size());
    ASSERT_TRUE(f.ok());
    auto m = LlamaModel::load(*f, *backend);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.message().find("'blk.1.attn_k.weight' has shape [32, 64], expected [64, 32]"), std::string::npos)
        << m.message();
  }
}

TEST(ModelConfig, Llama3RopeFactorsFollowMetasFormula) {
  // Llama 3.1: factor 8, low 1, high 4, original context 8192, head_dim 128, base 500000.
  const auto f = llama3_rope_freq_factors(128, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
  ASSERT_EQ(f.size(), 64u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);    // highest frequency: wavelength 2*pi < 2048, unchanged
  EXPECT_FLOAT_EQ(f[63], 8.0f);   // lowest frequency: wavelength far beyond 8192, slowed 8x
  // A band frequency, worked by hand: pair k = 30 (i = 60): freq = 500000^(-60/128).
  const double freq = std::pow(500000.0, -60.0 / 128.0);
  const double wavelen = 2 * M_PI / freq;
  ASSERT_TRUE(wavelen > 2048 && wavelen < 8192);
  const double smooth = (8192 / wavelen - 1) / (4 - 1);
  EXPECT_NEAR(f[30], 1 / ((1 - smooth) / 8 + smooth), 1e-5);
  for (size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i], f[i - 1]);
}

}  // namespace
}  // namespace th
