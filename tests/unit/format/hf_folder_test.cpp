// Hugging Face folders and safetensors: every malformed input is one line naming the
// file and the thing, never a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "format/hf_config.h"
#include "format/hf_folder.h"
#include "format/safetensors.h"
#include "model/synthetic_model.h"
#include "test_util.h"

namespace th {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> safetensors_image(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> out(8 + header.size() + data_bytes, 0);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

std::string parse_error(const std::vector<uint8_t>& img, size_t size) {
  auto r = parse_safetensors(img.data(), size, "x.safetensors");
  return r.ok() ? "" : r.message();
}

TEST(Safetensors, ParsesAndRefusesBadHeaders) {
  const std::string good = R"({"__metadata__": {"format": "pt"}, "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
                               "b": {"dtype": "BF16", "shape": [4], "data_offsets": [24, 32]}})";
  auto img = safetensors_image(good, 32);
  auto r = parse_safetensors(img.data(), img.size(), "x.safetensors");
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ((*r)[1].type, DType::BF16);

  EXPECT_NE(parse_error(img, 5).find("x.safetensors: truncated safetensors header"), std::string::npos);
  EXPECT_NE(parse_error(img, 8 + good.size() - 1).find("header length"), std::string::npos);  // past the file
  auto bad = [](const std::string& h, size_t data) { auto i = safetensors_image(h, data); return parse_error(i, i.size()); };
  EXPECT_NE(bad("[1, 2]", 0).find("not a JSON object"), std::string::npos);
  EXPECT_NE(bad("{\"a\": ", 0).find("not a JSON object"), std::string::npos);
  EXPECT_NE(bad(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}})", 8).find("tensor 'a': data_offsets [0, 16] outside"),
            std::string::npos);
  EXPECT_NE(bad(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 0]}})", 8).find("outside"), std::string::npos);
  EXPECT_NE(bad(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8).find("8 bytes for 3 elements"),
            std::string::npos);
  EXPECT_NE(bad(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                    "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12).find("'a' and 'b' overlap"),
            std::string::npos);
  EXPECT_NE(bad(R"({"a": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 8]}})", 8).find("unknown dtype 'Q4'"), std::string::npos);
  EXPECT_NE(bad(R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8).find("not a size"), std::string::npos);
  EXPECT_NE(bad(R"({"a": {"dtype": "F32", "shape": [2]}})", 8).find("data_offsets"), std::string::npos);
}

// A valid folder of mkmodel's tiny qwen2 (f32), each test breaking one thing.
class HfFolderErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    GgufWriter v;
    v.add_string("tokenizer.ggml.model", "gpt2");
    v.add_string("tokenizer.ggml.pre", "llama-bpe");
    GgufArray tokens, types;
    tokens.elem_type = GgufType::STRING;
    types.elem_type = GgufType::INT32;
    for (int i = 0; i < 64; ++i) {
      tokens.strings.push_back("t" + std::to_string(i));
      types.ints.push_back(1);
    }
    GgufArray merges;
    merges.elem_type = GgufType::STRING;
    v.add_array("tokenizer.ggml.tokens", tokens);
    v.add_array("tokenizer.ggml.token_type", types);
    v.add_array("tokenizer.ggml.merges", merges);
    vocab_bytes_ = v.to_bytes();
    auto vocab = GgufFile::parse(vocab_bytes_.data(), vocab_bytes_.size());
    ASSERT_TRUE(vocab.ok()) << vocab.message();
    SyntheticSpec spec;
    spec.shape = *synthetic_shape("tiny");
    spec.type = DType::F32;
    ASSERT_TRUE(apply_synthetic_arch("qwen2", spec).ok());
    gguf_ = test::temp_path("hf_err.gguf");
    dir_ = test::temp_path("hf_err");
    ASSERT_TRUE(write_synthetic_model(spec, *vocab, gguf_).ok());
    auto g = GgufFile::open(gguf_);
    ASSERT_TRUE(g.ok());
    ASSERT_TRUE(write_hf_folder(*g, dir_, {}).ok());
    ASSERT_TRUE(open_hf_folder(dir_).ok()) << open_hf_folder(dir_).message();
  }
  void TearDown() override {
    fs::remove_all(dir_);
    std::remove(gguf_.c_str());
  }
  std::string read(const std::string& f) {
    std::ifstream in(dir_ + "/" + f, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void write(const std::string& f, const std::string& text) { std::ofstream(dir_ + "/" + f, std::ios::binary) << text; }
  void replace(const std::string& f, const std::string& from, const std::string& to) {
    std::string s = read(f);
    const size_t at = s.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    write(f, s.replace(at, from.size(), to));
  }
  // Rewrites model.safetensors through `edit` of its tensors.
  template <class F>
  void edit_weights(F edit) {
    auto st = SafetensorsFile::open(dir_ + "/model.safetensors");
    ASSERT_TRUE(st.ok());
    std::vector<SafetensorsTensor> t = st->tensors;
    edit(t);
    const std::string tmp = dir_ + "/new.safetensors";
    ASSERT_TRUE(write_safetensors(tmp, t).ok());
    fs::rename(tmp, dir_ + "/model.safetensors");
  }
  std::string error() {
    auto r = open_hf_folder(dir_);
    EXPECT_FALSE(r.ok());
    const std::string m = r.ok() ? "" : r.message();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    return m;
  }
  std::vector<uint8_t> vocab_bytes_;
  std::string gguf_, dir_;
};

TEST_F(HfFolderErrors, MissingConfig) {
  fs::remove(dir_ + "/config.json");
  EXPECT_EQ(error(), dir_ + "/config.json: missing");
}

TEST_F(HfFolderErrors, BadConfigJson) {
  write("config.json", "{\"model_type\": ");
  EXPECT_EQ(error(), dir_ + "/config.json: not a JSON object");
}

TEST_F(HfFolderErrors, UnknownModelType) {
  replace("config.json", "\"qwen2\"", "\"gpt_neox\"");
  EXPECT_NE(error().find("config.json: unsupported model_type 'gpt_neox' (supported: llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, gemma2, gemma3_text, phi3)"),
            std::string::npos);
}

TEST_F(HfFolderErrors, UnsupportedRopeScaling) {
  replace("config.json", "\"rope_scaling\": null", R"("rope_scaling": {"rope_type": "dynamic", "factor": 4.0})");
  EXPECT_NE(error().find("config.json: unsupported rope_scaling type 'dynamic' (supported: default, linear, llama3, yarn)"),
            std::string::npos);
}

TEST_F(HfFolderErrors, MissingTensor) {
  edit_weights([](std::vector<SafetensorsTensor>& t) {
    std::erase_if(t, [](const SafetensorsTensor& x) { return x.name == "model.layers.1.mlp.up_proj.weight"; });
  });
  EXPECT_EQ(error(), dir_ + "/model.safetensors: missing tensor 'model.layers.1.mlp.up_proj.weight'");
}

TEST_F(HfFolderErrors, WrongShape) {
  replace("config.json", "\"intermediate_size\": 128", "\"intermediate_size\": 96");
  EXPECT_EQ(error(), dir_ + "/model.safetensors: tensor 'model.layers.0.mlp.gate_proj.weight' has shape [128, 64], "
                            "expected [96, 64] (from config.json)");
}

TEST_F(HfFolderErrors, UnsupportedDtype) {
  edit_weights([](std::vector<SafetensorsTensor>& t) {
    for (auto& x : t)
      if (x.name == "model.norm.weight") x.dtype = "I32";  // the same 4 bytes per element
  });
  EXPECT_EQ(error(), dir_ + "/model.safetensors: tensor 'model.norm.weight' has dtype I32 (supported: F32, F16, BF16)");
}

TEST_F(HfFolderErrors, TruncatedWeights) {
  std::string s = read("model.safetensors");
  write("model.safetensors", s.substr(0, 100));
  EXPECT_NE(error().find("model.safetensors: safetensors header length"), std::string::npos);
}

TEST_F(HfFolderErrors, BadTokenizerJson) {
  write("tokenizer.json", "{\"model\": {\"type\": \"Unigram\"}}");
  EXPECT_EQ(error(), dir_ + "/tokenizer.json: tokenizer model 'Unigram' is not supported (BPE: byte-level or byte_fallback)");
  write("tokenizer.json", "not json");
  EXPECT_EQ(error(), dir_ + "/tokenizer.json: not a JSON object");
}

TEST_F(HfFolderErrors, IndexNamingAMissingShard) {
  write("model.safetensors.index.json", R"({"weight_map": {"model.norm.weight": "model-00002-of-00002.safetensors"}})");
  EXPECT_NE(error().find("model-00002-of-00002.safetensors: cannot open"), std::string::npos);
  write("model.safetensors.index.json", R"({"weight_map": {"model.norm.weight": "../x"}})");
  EXPECT_NE(error().find("not a file in the folder"), std::string::npos);
}

// config.json of the newer architectures: what is refused is one line naming the file and the key.
TEST(HfConfig, ArchitectureKeysAndErrors) {
  auto cfg = [](const std::string& model_type, const std::string& extra) {
    return R"({"model_type": ")" + model_type +
           R"(", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
               "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 1024)" + extra + "}";
  };
  auto err = [](const std::string& text) {
    auto r = parse_hf_config(text, "d/config.json");
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.message();
  };
  auto key = [](const HfConfig& c, const std::string& k) -> const GgufValue* {
    for (const auto& [name, v] : c.metadata)
      if (name == k) return &v;
    return nullptr;
  };
  Result<HfConfig> c = parse_hf_config(cfg("mistral", R"(, "sliding_window": 4096)"), "d/config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  ASSERT_TRUE(key(*c, "llama.attention.sliding_window"));
  EXPECT_EQ(std::get<int64_t>(key(*c, "llama.attention.sliding_window")->v), 4096);
  c = parse_hf_config(cfg("mixtral", R"(, "sliding_window": null, "num_local_experts": 8, "num_experts_per_tok": 2)"),
                      "d/config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_FALSE(key(*c, "llama.attention.sliding_window"));
  EXPECT_EQ(c->n_expert, 8);
  const std::string gemma3 = R"(, "head_dim": 32, "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 512)";
  c = parse_hf_config(cfg("gemma3_text", gemma3 + R"(, "layer_types": ["sliding_attention", "full_attention"])"),
                      "d/config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(std::get<int64_t>(key(*c, "gemma3.attention.sliding_window_pattern")->v), 2);
  c = parse_hf_config(cfg("phi3", R"(, "original_max_position_embeddings": 256, "rope_scaling": {"type": "longrope",
                          "long_factor": [1, 2, 3, 4, 5, 6, 7, 8], "short_factor": [1, 1, 1, 1, 1, 1, 1, 1]})"),
                      "d/config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  ASSERT_EQ(c->extra_tensors.size(), 2u);
  EXPECT_EQ(c->extra_tensors[0].first, "rope_factors_long.weight");
  EXPECT_NEAR(std::get<double>(key(*c, "phi3.rope.scaling.attn_factor")->v), std::sqrt(1 + std::log(4.0) / std::log(256.0)),
              1e-12);

  EXPECT_EQ(err(cfg("gemma3_text", gemma3 + R"(, "layer_types": ["full_attention", "sliding_attention"])")),
            "d/config.json: layer_types is not every n-th layer global (unsupported pattern)");
  EXPECT_EQ(err(cfg("gemma2", R"(, "hidden_activation": "gelu_pytorch_tanh", "attn_logit_softcapping": null)")),
            "d/config.json: attn_logit_softcapping null is not supported for gemma2");
  EXPECT_EQ(err(cfg("gemma2", R"(, "hidden_act": "silu")")),
            "d/config.json: hidden_act \"silu\" is not supported (gelu_pytorch_tanh)");
  EXPECT_EQ(err(cfg("qwen3_moe", R"(, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64)")),
            "d/config.json: norm_topk_prob other than true is not supported");
  EXPECT_EQ(err(cfg("mixtral", R"(, "num_local_experts": 2, "num_experts_per_tok": 3)")),
            "d/config.json: num_experts_per_tok 3 is past the 2 experts");
  EXPECT_EQ(err(cfg("phi3", R"(, "rope_scaling": {"type": "yarn", "factor": 4.0})")),
            "d/config.json: unsupported rope_scaling type 'yarn' for phi3 (supported: longrope, su)");
  EXPECT_EQ(err(cfg("phi3", R"(, "original_max_position_embeddings": 256, "rope_scaling": {"type": "longrope",
                    "long_factor": [1, 2], "short_factor": [1, 2]})")),
            "d/config.json: rope_scaling 'long_factor' is not a list of 8 numbers (rope dimensions / 2)");
  EXPECT_EQ(err(cfg("qwen2", R"(, "rope_scaling": {"type": "yarn", "factor": 4.0, "mscale": 0.7})")),
            "d/config.json: rope_scaling yarn with 'mscale' is not supported (its defaults only)");
  EXPECT_TRUE(parse_hf_config(cfg("qwen2", R"(, "use_sliding_window": false, "max_window_layers": 1)"), "d").ok());
  EXPECT_EQ(err(cfg("qwen2", R"(, "use_sliding_window": true, "sliding_window": 64, "max_window_layers": 1)")),
            "d/config.json: use_sliding_window true is not supported (sliding windows from max_window_layers on)");
  EXPECT_EQ(err(cfg("gemma3", gemma3)).rfind("d/config.json: unsupported model_type 'gemma3' (supported: ", 0), 0u);

  // Gemma 3 4B's config.json as on the hub: the text_config lists only what differs from
  // Gemma3TextConfig's defaults; the rest (heads, head_dim, vocab, the window pattern) are those.
  c = parse_hf_config(R"({"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
      "eos_token_id": [1, 106], "mm_tokens_per_image": 256, "text_config": {"hidden_size": 2560,
      "intermediate_size": 10240, "model_type": "gemma3_text", "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0,
      "rope_type": "linear"}, "sliding_window": 1024}, "vision_config": {"model_type": "siglip_vision_model"}})",
                      "d/config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->tensor_prefix, "language_model.");
  EXPECT_EQ(c->n_layer, 34);
  EXPECT_EQ(c->n_head, 8);
  EXPECT_EQ(c->n_head_kv, 4);
  EXPECT_EQ(c->head_dim, 256);
  EXPECT_EQ(c->n_vocab, 262208);
  EXPECT_EQ(c->eos, 1);
  EXPECT_TRUE(c->tied);
  EXPECT_EQ(std::get<int64_t>(key(*c, "gemma3.attention.sliding_window")->v), 1024);
  EXPECT_EQ(std::get<int64_t>(key(*c, "gemma3.attention.sliding_window_pattern")->v), 6);
  EXPECT_EQ(std::get<double>(key(*c, "gemma3.rope.scaling.factor")->v), 8.0);
  EXPECT_EQ(err(R"({"model_type": "gemma3", "text_config": [1]})"), "d/config.json: 'text_config' is not an object");
  EXPECT_EQ(err(R"({"model_type": "gemma3", "text_config": {"model_type": "llama"}})"),
            "d/config.json: text_config's model_type \"llama\" is not gemma3_text");
  EXPECT_EQ(err(R"({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "hidden_activation": "silu"}})"),
            "d/config.json (text_config): hidden_activation \"silu\" is not supported (gelu_pytorch_tanh)");
}

}  // namespace
}  // namespace th
