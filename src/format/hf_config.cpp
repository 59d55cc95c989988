#include "format/hf_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace th {

namespace {

using json = nlohmann::json;
using D = HfDim;

// The names as llama.cpp's gguf-py tensor_mapping.py maps them (upstream 82bb48500).
#define TH_HF_COMMON_ROWS                                                                                   \
  {"model.embed_tokens.weight", "token_embd.weight", D::Vocab, D::Embd},                                   \
      {"model.norm.weight", "output_norm.weight", D::Embd, D::None},                                       \
      {"lm_head.weight", "output.weight", D::Vocab, D::Embd, true},                                        \
      {"model.layers.{N}.input_layernorm.weight", "blk.{N}.attn_norm.weight", D::Embd, D::None},           \
      {"model.layers.{N}.self_attn.q_proj.weight", "blk.{N}.attn_q.weight", D::QDim, D::Embd},             \
      {"model.layers.{N}.self_attn.k_proj.weight", "blk.{N}.attn_k.weight", D::KvDim, D::Embd},            \
      {"model.layers.{N}.self_attn.v_proj.weight", "blk.{N}.attn_v.weight", D::KvDim, D::Embd},            \
      {"model.layers.{N}.self_attn.o_proj.weight", "blk.{N}.attn_output.weight", D::Embd, D::QDim},        \
      {"model.layers.{N}.post_attention_layernorm.weight", "blk.{N}.ffn_norm.weight", D::Embd, D::None},   \
      {"model.layers.{N}.mlp.gate_proj.weight", "blk.{N}.ffn_gate.weight", D::Ff, D::Embd},                \
      {"model.layers.{N}.mlp.up_proj.weight", "blk.{N}.ffn_up.weight", D::Ff, D::Embd},                    \
      {"model.layers.{N}.mlp.down_proj.weight", "blk.{N}.ffn_down.weight", D::Embd, D::Ff}

constexpr HfTensorRow kLlama[] = {
    TH_HF_COMMON_ROWS,
    // attention_bias: true (some Llama fine-tunes)
    {"model.layers.{N}.self_attn.q_proj.bias", "blk.{N}.attn_q.bias", D::QDim, D::None, true},
    {"model.layers.{N}.self_attn.k_proj.bias", "blk.{N}.attn_k.bias", D::KvDim, D::None, true},
    {"model.layers.{N}.self_attn.v_proj.bias", "blk.{N}.attn_v.bias", D::KvDim, D::None, true},
};
constexpr HfTensorRow kQwen2[] = {
    TH_HF_COMMON_ROWS,
    {"model.layers.{N}.self_attn.q_proj.bias", "blk.{N}.attn_q.bias", D::QDim, D::None},
    {"model.layers.{N}.self_attn.k_proj.bias", "blk.{N}.attn_k.bias", D::KvDim, D::None},
    {"model.layers.{N}.self_attn.v_proj.bias", "blk.{N}.attn_v.bias", D::KvDim, D::None},
};
constexpr HfTensorRow kQwen3[] = {
    TH_HF_COMMON_ROWS,
    {"model.layers.{N}.self_attn.q_norm.weight", "blk.{N}.attn_q_norm.weight", D::HeadDim, D::None},
    {"model.layers.{N}.self_attn.k_norm.weight", "blk.{N}.attn_k_norm.weight", D::HeadDim, D::None},
};
#undef TH_HF_COMMON_ROWS

constexpr HfArch kArchs[] = {
    {"llama", "llama", true, kLlama},
    {"mistral", "llama", true, kLlama},
    {"qwen2", "qwen2", false, kQwen2},
    {"qwen3", "qwen3", false, kQwen3},
};

GgufValue u32(int64_t v) { return GgufValue{GgufType::UINT32, v}; }
GgufValue f32(double v) { return GgufValue{GgufType::FLOAT32, v}; }

// A positive integer key; `def` < 0: required.
Result<int64_t> int_key(const json& j, const char* key, int64_t def, const std::string& name) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (def >= 0) return def;
    return Status::errorf(name, ": '", key, "' is missing");
  }
  if (!it->is_number_unsigned() || it->get<uint64_t>() == 0 || it->get<uint64_t>() > (1ull << 31))
    return Status::errorf(name, ": '", key, "' is not a positive integer");
  return static_cast<int64_t>(it->get<uint64_t>());
}

Result<double> float_key(const json& j, const char* key, double def, const std::string& name) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (def >= 0) return def;
    return Status::errorf(name, ": '", key, "' is missing");
  }
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() <= 0)
    return Status::errorf(name, ": '", key, "' is not a positive number");
  return it->get<double>();
}

// rope_scaling: none, linear, or Llama 3's (its factors computed by the model config, as
// llama.cpp's converter computes them into rope_freqs.weight).
Status read_rope_scaling(const json& j, const std::string& a, HfConfig& c, const std::string& name) {
  auto it = j.find("rope_scaling");
  if (it == j.end() || it->is_null()) return ok_status();
  if (!it->is_object()) return Status::errorf(name, ": 'rope_scaling' is not an object");
  const json& r = *it;
  std::string type;
  for (const char* k : {"rope_type", "type"})
    if (r.contains(k) && r[k].is_string()) type = r[k].get<std::string>();
  auto& m = c.metadata;
  if (type == "default") return ok_status();
  if (type == "linear") {
    TH_ASSIGN_OR_RETURN(double factor, float_key(r, "factor", -1, name + " rope_scaling"));
    m.emplace_back(a + "rope.scaling.type", GgufValue{GgufType::STRING, std::string("linear")});
    m.emplace_back(a + "rope.scaling.factor", f32(factor));
    return ok_status();
  }
  if (type == "llama3") {
    TH_ASSIGN_OR_RETURN(double factor, float_key(r, "factor", -1, name + " rope_scaling"));
    TH_ASSIGN_OR_RETURN(double lo, float_key(r, "low_freq_factor", -1, name + " rope_scaling"));
    TH_ASSIGN_OR_RETURN(double hi, float_key(r, "high_freq_factor", -1, name + " rope_scaling"));
    TH_ASSIGN_OR_RETURN(int64_t orig, int_key(r, "original_max_position_embeddings", -1, name + " rope_scaling"));
    if (!(hi > lo)) return Status::errorf(name, ": rope_scaling high_freq_factor is not above low_freq_factor");
    m.emplace_back(a + "rope.scaling.type", GgufValue{GgufType::STRING, std::string("llama3")});
    m.emplace_back(a + "rope.scaling.factor", f32(factor));
    m.emplace_back(a + "rope.scaling.low_freq_factor", f32(lo));
    m.emplace_back(a + "rope.scaling.high_freq_factor", f32(hi));
    m.emplace_back(a + "rope.scaling.original_context_length", u32(orig));
    return ok_status();
  }
  return Status::errorf(name, ": unsupported rope_scaling type '", type.empty() ? "(none given)" : type,
                        "' (supported: default, linear, llama3)");
}

}  // namespace

const HfArch* find_hf_arch(std::string_view model_type) {
  for (const HfArch& a : kArchs)
    if (a.model_type == model_type) return &a;
  return nullptr;
}

const HfArch* find_hf_arch_for_gguf(std::string_view gguf_arch) {
  for (const HfArch& a : kArchs)
    if (a.gguf_arch == gguf_arch) return &a;
  return nullptr;
}

std::string hf_arch_names() {
  std::string out;
  for (const HfArch& a : kArchs) out += (out.empty() ? "" : ", ") + std::string(a.model_type);
  return out;
}

std::string hf_layer_name(std::string_view pattern, int64_t layer) {
  std::string s(pattern);
  if (size_t at = s.find("{N}"); at != std::string::npos) s.replace(at, 3, std::to_string(layer));
  return s;
}

int64_t HfConfig::dim(HfDim d) const {
  switch (d) {
    case HfDim::Embd: return n_embd;
    case HfDim::Ff: return n_ff;
    case HfDim::QDim: return n_head * head_dim;
    case HfDim::KvDim: return n_head_kv * head_dim;
    case HfDim::HeadDim: return head_dim;
    case HfDim::Vocab: return n_vocab;
    case HfDim::None: break;
  }
  return 0;
}

Result<HfConfig> parse_hf_config(std::string_view text, const std::string& name) {
  const json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::errorf(name, ": not a JSON object");
  HfConfig c;
  auto mt = j.find("model_type");
  if (mt == j.end() || !mt->is_string()) return Status::errorf(name, ": 'model_type' is missing");
  c.arch = find_hf_arch(mt->get<std::string>());
  if (!c.arch)
    return Status::errorf(name, ": unsupported model_type '", mt->get<std::string>(), "' (supported: ",
                          hf_arch_names(), ")");
  if (auto act = j.find("hidden_act"); act != j.end() && !(act->is_string() && *act == "silu"))
    return Status::errorf(name, ": hidden_act ", act->dump(), " is not supported (silu)");
  TH_ASSIGN_OR_RETURN(c.n_layer, int_key(j, "num_hidden_layers", -1, name));
  TH_ASSIGN_OR_RETURN(c.n_embd, int_key(j, "hidden_size", -1, name));
  TH_ASSIGN_OR_RETURN(c.n_ff, int_key(j, "intermediate_size", -1, name));
  TH_ASSIGN_OR_RETURN(c.n_head, int_key(j, "num_attention_heads", -1, name));
  TH_ASSIGN_OR_RETURN(c.n_head_kv, int_key(j, "num_key_value_heads", c.n_head, name));
  TH_ASSIGN_OR_RETURN(c.n_vocab, int_key(j, "vocab_size", -1, name));
  if (c.n_vocab > (1 << 22)) return Status::errorf(name, ": vocab_size ", c.n_vocab, " is past 4194304");  // no real model is near
  if (c.n_embd % c.n_head != 0 && !j.contains("head_dim"))
    return Status::errorf(name, ": hidden_size ", c.n_embd, " is not a multiple of num_attention_heads ", c.n_head);
  TH_ASSIGN_OR_RETURN(c.head_dim, int_key(j, "head_dim", c.n_embd / c.n_head, name));
  TH_ASSIGN_OR_RETURN(int64_t n_ctx, int_key(j, "max_position_embeddings", 2048, name));
  TH_ASSIGN_OR_RETURN(double theta, float_key(j, "rope_theta", 10000.0, name));
  TH_ASSIGN_OR_RETURN(double eps, float_key(j, "rms_norm_eps", 1e-6, name));
  if (auto t = j.find("tie_word_embeddings"); t != j.end()) {
    if (!t->is_boolean()) return Status::errorf(name, ": 'tie_word_embeddings' is not a boolean");
    c.tied = t->get<bool>();
  }
  for (auto [key, out] : {std::pair{"bos_token_id", &c.bos}, std::pair{"eos_token_id", &c.eos}}) {
    auto it = j.find(key);
    if (it == j.end()) continue;
    const json& v = it->is_array() && !it->empty() ? (*it)[0] : *it;  // Llama 3.1 lists several eos ids
    if (v.is_number_unsigned()) *out = static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), 1ull << 31));
  }

  const std::string arch(c.arch->gguf_arch), a = arch + ".";
  auto& m = c.metadata;
  m.emplace_back("general.architecture", GgufValue{GgufType::STRING, arch});
  m.emplace_back(a + "block_count", u32(c.n_layer));
  m.emplace_back(a + "embedding_length", u32(c.n_embd));
  m.emplace_back(a + "feed_forward_length", u32(c.n_ff));
  m.emplace_back(a + "attention.head_count", u32(c.n_head));
  m.emplace_back(a + "attention.head_count_kv", u32(c.n_head_kv));
  m.emplace_back(a + "attention.key_length", u32(c.head_dim));
  m.emplace_back(a + "attention.value_length", u32(c.head_dim));
  m.emplace_back(a + "rope.dimension_count", u32(c.head_dim));
  m.emplace_back(a + "context_length", u32(n_ctx));
  m.emplace_back(a + "rope.freq_base", f32(theta));
  m.emplace_back(a + "attention.layer_norm_rms_epsilon", f32(eps));
  if (c.arch->rope_neox_unpermuted) m.emplace_back("tokenhive.rope.neox", GgufValue{GgufType::BOOL, true});
  TH_RETURN_IF_ERROR(read_rope_scaling(j, a, c, name));
  return c;
}

}  // namespace th
