// A model written by mkmodel as GGUF and as a Hugging Face folder (write_hf_folder) gives
// the same logits from both, for every architecture (the GGUF path is the one checked against
// llama.cpp); gemma3 also as a vision-language folder (text_config over Gemma3TextConfig's
// defaults, tensors under language_model., a vision tower not loaded). qwen2/qwen3/qwen3moe/
// gemma2/gemma3/phi3 keep the same layout: bit for bit
// (gemma's norms go through w - 1 + 1, exact for w in [0.9, 1.1] by Sterbenz; phi3's rope
// factors through JSON's shortest round-trip text). llama's (mistral's, mixtral's) HF q/k
// rows are in rotate-half order (not permuted as in the GGUF) and run with half-rotating
// RoPE: the same values rotated, but each head's q.k sums its terms in another order, so
// logits agree to f32 rounding: a 32-term dot product reordered moves by <= 32 u |q||k|
// (u = 2^-24, ~2e-6 relative) and far less for random signs; bound 1e-5 of the logit range.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include <nlohmann/json.hpp>

#include "format/gguf.h"
#include "format/hf_folder.h"
#include "kv/kv_cache.h"
#include "model/llama_model.h"
#include "model/synthetic_model.h"
#include "test_util.h"

namespace th {
namespace {

// A small byte-level BPE vocabulary (what a tokenizer.json can hold): 300 tokens, one control.
std::vector<uint8_t> small_bpe_vocab() {
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "qwen2");
  GgufArray tokens, types;
  tokens.elem_type = GgufType::STRING;
  types.elem_type = GgufType::INT32;
  for (int i = 0; i < 300; ++i) {
    tokens.strings.push_back(i == 299 ? "<|endoftext|>" : "t" + std::to_string(i));
    types.ints.push_back(i == 299 ? 3 : 1);
  }
  GgufArray merges;
  merges.elem_type = GgufType::STRING;
  merges.strings = {"t 1", "t1 0"};
  w.add_array("tokenizer.ggml.tokens", tokens);
  w.add_array("tokenizer.ggml.token_type", types);
  w.add_array("tokenizer.ggml.merges", merges);
  w.add_u32("tokenizer.ggml.eos_token_id", 299);
  w.add_string("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}");
  return w.to_bytes();
}

struct HfCase {
  std::string arch;  // mkmodel --arch
  int shards;
  bool tied;
  double tol;  // max |diff| / logit range; 0: bit for bit
};
void PrintTo(const HfCase& c, std::ostream* os) { *os << c.arch; }

class HfFolderModel : public ::testing::TestWithParam<HfCase> {};

TEST_P(HfFolderModel, SameLogitsAsGguf) {
  const HfCase& c = GetParam();
  const std::vector<uint8_t> vocab_bytes = small_bpe_vocab();
  Result<GgufFile> vocab = GgufFile::parse(vocab_bytes.data(), vocab_bytes.size(), "vocab");
  ASSERT_TRUE(vocab.ok()) << vocab.message();
  SyntheticSpec spec;
  spec.shape = *synthetic_shape("tiny");
  spec.type = DType::F32;
  spec.tied_output = c.tied;
  const bool vl = c.arch == "gemma3-vl";  // the same model as a vision-language folder
  ASSERT_TRUE(apply_synthetic_arch(vl ? "gemma3" : c.arch, spec).ok());
  const std::string gguf_path = test::temp_path("hf_" + c.arch + ".gguf");
  const std::string dir = test::temp_path("hf_" + c.arch);
  ASSERT_TRUE(write_synthetic_model(spec, *vocab, gguf_path).ok());
  Result<GgufFile> g = GgufFile::open(gguf_path);
  ASSERT_TRUE(g.ok()) << g.message();
  HfWriteOptions o;
  o.shards = c.shards;
  o.rope_scaling = synthetic_hf_rope_scaling(spec);  // llama3: what its rope_freqs.weight is made from
  EXPECT_EQ(o.rope_scaling.empty(), !spec.llama3_rope);
  o.vision_language = vl;
  ASSERT_TRUE(write_hf_folder(*g, dir, o).ok());
  if (vl) {  // the text model's keys at their Gemma3TextConfig defaults are left out, as on the hub
    std::ifstream in(dir + "/config.json");
    const nlohmann::json cfg = nlohmann::json::parse(in);
    EXPECT_EQ(cfg["architectures"][0], "Gemma3ForConditionalGeneration");
    EXPECT_FALSE(cfg["text_config"].contains("hidden_activation"));
    EXPECT_FALSE(cfg["text_config"].contains("rope_local_base_freq"));
  }
  EXPECT_EQ(std::filesystem::exists(dir + "/model.safetensors.index.json"), c.shards > 1);
  Result<GgufFile> h = open_hf_folder(dir);
  ASSERT_TRUE(h.ok()) << h.message();

  std::unique_ptr<Backend> b = make_cpu_backend();
  std::vector<std::vector<float>> logits(2);
  for (int which = 0; which < 2; ++which) {
    auto m = LlamaModel::load(which == 0 ? *g : *h, *b);
    ASSERT_TRUE(m.ok()) << m.message();
    const ModelConfig& cfg = (*m)->config();
    EXPECT_EQ(cfg.rope_neox, which == 1 || spec.arch != Arch::Llama);
    auto kv = KvCache::create(*b, cfg.n_layer, cfg.kv_dim(), 16, 4);
    std::vector<int32_t> table;
    ASSERT_TRUE(kv->reserve(table, 40));
    ForwardBatch fb;
    fb.tables = {table};
    for (int32_t p = 0; p < 40; ++p) fb.add((p * 37 + 5) % 300, 0, p, p % 8 == 7);
    ASSERT_TRUE((*m)->forward(fb, *kv, &logits[which]).ok());
  }
  ASSERT_EQ(logits[0].size(), logits[1].size());
  const int64_t n_vocab = 300;
  double worst = 0;
  for (size_t row = 0; row * n_vocab < logits[0].size(); ++row) {
    const float* a = logits[0].data() + row * n_vocab;
    const float* b2 = logits[1].data() + row * n_vocab;
    const auto [lo, hi] = std::minmax_element(a, a + n_vocab);
    double diff = 0;
    for (int64_t v = 0; v < n_vocab; ++v) diff = std::max(diff, std::fabs(double(a[v]) - b2[v]));
    worst = std::max(worst, diff / (*hi - *lo));
  }
  std::printf("[ %s ] max |gguf - hf| / range = %.3g\n", c.arch.c_str(), worst);
  if (c.tol == 0) {
    EXPECT_EQ(logits[0], logits[1]);
  } else {
    EXPECT_LT(worst, c.tol);
  }
  std::filesystem::remove_all(dir);
  std::remove(gguf_path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Archs, HfFolderModel,
                         ::testing::Values(HfCase{"llama", 1, false, 1e-5}, HfCase{"llama3", 2, true, 1e-5},
                                           HfCase{"mistral", 1, false, 1e-5}, HfCase{"mixtral", 3, false, 1e-5},
                                           HfCase{"qwen2", 2, false, 0}, HfCase{"qwen2-yarn", 1, false, 0}, HfCase{"qwen3", 1, true, 0},
                                           HfCase{"qwen3moe", 3, false, 0}, HfCase{"gemma2", 2, false, 0},
                                           HfCase{"gemma3", 1, false, 0}, HfCase{"gemma3-vl", 2, false, 0},
                                           HfCase{"phi3", 2, false, 0}),
                         [](const ::testing::TestParamInfo<HfCase>& i) {
                           std::string n = i.param.arch;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace th
