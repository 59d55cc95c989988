// What loading says when a file of a newer architecture is wrong: an unknown
// architecture, a missing tensor, a tensor of the wrong shape, an unsupported
// rope scaling. Each is one line naming the file and the thing.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "format/gguf.h"
#include "model/llama_model.h"
#include "model/synthetic_model.h"
#include "test_util.h"

namespace th {
namespace {

// The tiny f32 model of `arch`, rewritten with `edit_key` applied to each metadata entry
// (return false to drop it), tensor `skip` left out and tensor `reshape` given `dims`.
std::vector<uint8_t> tiny_model(const std::string& arch, const std::function<bool(std::string&, GgufValue&)>& edit_key,
                                const std::string& skip = "", const std::string& reshape = "",
                                std::vector<int64_t> dims = {}) {
  SyntheticSpec spec;
  spec.shape = *synthetic_shape("tiny");
  spec.type = DType::F32;
  EXPECT_TRUE(apply_synthetic_arch(arch, spec).ok());
  Result<GgufFile> vocab = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  EXPECT_TRUE(vocab.ok());
  const std::string path = test::temp_path("arch_err_" + arch + ".gguf");
  EXPECT_TRUE(write_synthetic_model(spec, *vocab, path).ok());
  Result<GgufFile> src = GgufFile::open(path);
  EXPECT_TRUE(src.ok());
  GgufWriter w;
  for (auto [k, v] : src->metadata())
    if (edit_key(k, v)) w.add(k, v);
  for (const GgufTensor& t : src->tensors()) {
    if (t.name == skip) continue;
    if (t.name == reshape) {
      int64_t n = 1;
      for (int64_t d : dims) n *= d;
      std::vector<float> zeros(static_cast<size_t>(n));
      w.add_tensor(t.name, dims, DType::F32, zeros.data(), zeros.size() * sizeof(float));
    } else {
      w.add_tensor(t.name, t.dims, t.type, t.data, t.nbytes);
    }
  }
  std::remove(path.c_str());
  return w.to_bytes();
}

std::string load_error(const std::vector<uint8_t>& bytes) {
  Result<GgufFile> f = GgufFile::parse(bytes.data(), bytes.size(), "m.gguf");
  EXPECT_TRUE(f.ok()) << f.message();
  if (!f.ok()) return "";
  std::unique_ptr<Backend> b = make_reference_backend();
  auto m = LlamaModel::load(*f, *b);
  EXPECT_FALSE(m.ok());
  return m.ok() ? "" : m.message();
}

const auto keep = [](std::string&, GgufValue&) { return true; };

TEST(ArchLoadErrors, UnknownArchitectureIsNamedWithTheSupportedOnes) {
  const std::string msg = load_error(tiny_model("qwen3", [](std::string& k, GgufValue& v) {
    if (k == "general.architecture") v.v = std::string("mamba2");
    return true;
  }));
  EXPECT_NE(msg.find("m.gguf: unsupported architecture 'mamba2' (supported: llama, qwen2, qwen3, qwen3moe, gemma2, gemma3, phi3)"),
            std::string::npos) << msg;
}

TEST(ArchLoadErrors, MissingTensorsOfEachArchitectureAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"qwen3", "blk.1.attn_k_norm.weight"},       {"gemma2", "blk.0.post_ffw_norm.weight"},
      {"gemma3", "blk.5.attn_q_norm.weight"},      {"phi3", "blk.1.attn_qkv.weight"},
      {"qwen3moe", "blk.0.ffn_down_exps.weight"},  {"mixtral", "blk.1.ffn_gate_inp.weight"}};
  for (const auto& [arch, tensor] : cases) {
    const std::string msg = load_error(tiny_model(arch, keep, tensor));
    EXPECT_NE(msg.find("m.gguf: missing tensor '" + tensor + "'"),
              std::string::npos) << arch << ": " << msg;
  }
}

TEST(ArchLoadErrors, WrongShapesAreNamed) {
  // An expert tensor with one expert too few; a fused QKV one row short.
  std::string msg = load_error(tiny_model("qwen3moe", keep, "", "blk.1.ffn_up_exps.weight", {64, 64, 3}));
  EXPECT_NE(msg.find("m.gguf: tensor 'blk.1.ffn_up_exps.weight' has 3 dimensions [64, 64, 3], expected [64, 64, 4]"),
            std::string::npos) << msg;
  msg = load_error(tiny_model("phi3", keep, "", "blk.0.attn_qkv.weight", {64, 127}));
  EXPECT_NE(msg.find("m.gguf: tensor 'blk.0.attn_qkv.weight' has shape [64, 127], expected [64, 128]"),
            std::string::npos) << msg;
  msg = load_error(tiny_model("gemma3", keep, "", "blk.2.attn_k_norm.weight", {16}));
  EXPECT_NE(msg.find("m.gguf: tensor 'blk.2.attn_k_norm.weight' has 16 elements in 1 dimensions, expected a vector of 32"),
            std::string::npos) << msg;
}

TEST(ArchLoadErrors, UnsupportedRopeScalingIsNamed) {
  const std::string msg = load_error(tiny_model("gemma3", [](std::string& k, GgufValue& v) {
    if (k == "gemma3.rope.scaling.type") v.v = std::string("dynamic");
    return true;
  }));
  EXPECT_NE(msg.find("m.gguf: unsupported rope.scaling.type 'dynamic' (none, linear, llama3 and yarn are supported; "
                     "phi3: longrope)"),
            std::string::npos)
      << msg;
}

// Llama 3's scaling as keys (what a Hugging Face folder gives) needs all four of them.
TEST(ArchLoadErrors, Llama3RopeScalingWithoutItsKeysIsNamed) {
  const std::string msg = load_error(tiny_model("gemma3", [](std::string& k, GgufValue& v) {
    if (k == "gemma3.rope.scaling.type") v.v = std::string("llama3");
    return true;
  }));
  EXPECT_NE(msg.find("gemma3.rope.scaling.low_freq_factor"), std::string::npos) << msg;
}

TEST(ArchLoadErrors, MoeWithoutExpertCountIsRefused) {
  const std::string msg = load_error(tiny_model("qwen3moe", [](std::string& k, GgufValue&) {
    return k != "qwen3moe.expert_count";
  }));
  EXPECT_NE(msg.find("m.gguf: qwen3moe.expert_count is missing or 0"), std::string::npos) << msg;
}

}  // namespace
}  // namespace th
