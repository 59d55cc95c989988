// What config_from_gguf reads for the newer architectures' options: gemma's
// sliding-window layers (period from the file or the default, an array passed
// over as llama.cpp does), their RoPE, the query scale, and the experts.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "model/model_config.h"
#include "model/synthetic_model.h"
#include "test_util.h"

namespace th {
namespace {

// The tiny model's config, with `extra` metadata added after its own.
ModelConfig tiny_config(const std::string& arch, const std::function<void(GgufWriter&)>& extra = {}) {
  SyntheticSpec spec;
  spec.shape = *synthetic_shape("tiny");
  spec.type = DType::F32;
  EXPECT_TRUE(apply_synthetic_arch(arch, spec).ok());
  Result<GgufFile> vocab = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  EXPECT_TRUE(vocab.ok());
  const std::string path = test::temp_path("arch_cfg_" + arch + ".gguf");
  EXPECT_TRUE(write_synthetic_model(spec, *vocab, path).ok());
  Result<GgufFile> src = GgufFile::open(path);
  EXPECT_TRUE(src.ok());
  GgufWriter w;
  for (const auto& [k, v] : src->metadata()) w.add(k, v);
  if (extra) extra(w);
  for (const GgufTensor& t : src->tensors()) w.add_tensor(t.name, t.dims, t.type, t.data, t.nbytes);
  std::vector<uint8_t> bytes = w.to_bytes();
  std::remove(path.c_str());
  Result<GgufFile> f = GgufFile::parse(bytes.data(), bytes.size());
  EXPECT_TRUE(f.ok());
  Result<ModelConfig> c = config_from_gguf(*f);
  EXPECT_TRUE(c.ok()) << c.message();
  return c.ok() ? *c : ModelConfig{};
}

TEST(ArchConfig, GemmaSlidingWindowLayersAndRope) {
  // Gemma 3's default: five local layers, then a global one; local RoPE base 10000 unscaled,
  // global 1e6 at 1/8 (the linear scaling mkmodel writes).
  ModelConfig c = tiny_config("gemma3");
  EXPECT_EQ(c.layer_swa, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(c.sliding_window, 5);
  EXPECT_FLOAT_EQ(c.rope_freq_base_swa, 10000.0f);
  EXPECT_FLOAT_EQ(c.rope_freq_scale_swa, 1.0f);
  EXPECT_FLOAT_EQ(c.rope_freq_base, 1e6f);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.125f);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / std::sqrt(32.0f));  // head_dim, not the 27B rule
  EXPECT_FLOAT_EQ(c.final_softcap, 0.0f);
  c = tiny_config("gemma3", [](GgufWriter& w) { w.add_u32("gemma3.attention.sliding_window_pattern", 2); });
  EXPECT_EQ(c.layer_swa, (std::vector<uint8_t>{1, 0, 1, 0, 1, 0}));
  c = tiny_config("gemma3", [](GgufWriter& w) {
    GgufArray a;
    a.elem_type = GgufType::BOOL;
    a.bools.assign(6, 1);
    w.add_array("gemma3.attention.sliding_window_pattern", a);
  });
  EXPECT_EQ(c.layer_swa, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));
  // Gemma 2: every other layer, the softcaps from the file.
  c = tiny_config("gemma2");
  EXPECT_EQ(c.layer_swa, (std::vector<uint8_t>{1, 0}));
  EXPECT_FLOAT_EQ(c.attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(c.final_softcap, 30.0f);
}

TEST(ArchConfig, ExpertsAndPhi3Rope) {
  ModelConfig c = tiny_config("qwen3moe");
  EXPECT_EQ(c.n_expert, 4);
  EXPECT_EQ(c.n_expert_used, 2);
  EXPECT_EQ(c.n_ff_exp, 64);
  c = tiny_config("mixtral");
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.n_ff_exp, c.n_ff);
  c = tiny_config("phi3");
  EXPECT_EQ(c.rope_orig_ctx, 256);
  EXPECT_EQ(c.n_ctx_train, 1024);
  EXPECT_NEAR(c.rope_attn_factor, std::sqrt(1 + std::log(4.0) / std::log(256.0)), 1e-6);
}

}  // namespace
}  // namespace th
