#include "format/hf_config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace th {

namespace {

using json = nlohmann::json;
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
  if (type == "yarn") {  // Qwen2.5/Qwen3 long context: what llama.cpp's converter writes, plus the betas
    TH_ASSIGN_OR_RETURN(double factor, float_key(r, "factor", -1, name + " rope_scaling"));
    if (factor < 1) return Status::errorf(name, ": rope_scaling factor ", factor, " is below 1 (yarn)");
    TH_ASSIGN_OR_RETURN(int64_t n_ctx, int_key(j, "max_position_embeddings", 2048, name));
    TH_ASSIGN_OR_RETURN(int64_t orig, int_key(r, "original_max_position_embeddings", n_ctx, name + " rope_scaling"));
    for (const char* k : {"attention_factor", "mscale", "mscale_all_dim", "truncate"})
      if (r.contains(k) && !r[k].is_null())
        return Status::errorf(name, ": rope_scaling yarn with '", k, "' is not supported (its defaults only)");
    m.emplace_back(a + "rope.scaling.type", GgufValue{GgufType::STRING, std::string("yarn")});
    m.emplace_back(a + "rope.scaling.factor", f32(factor));
    m.emplace_back(a + "rope.scaling.original_context_length", u32(orig));
    for (auto [hf, key] : {std::pair{"beta_fast", "yarn_beta_fast"}, std::pair{"beta_slow", "yarn_beta_slow"}}) {
      if (!r.contains(hf) || r[hf].is_null()) continue;
      TH_ASSIGN_OR_RETURN(double beta, float_key(r, hf, -1, name + " rope_scaling"));
      m.emplace_back(a + "rope.scaling." + key, f32(beta));
    }
    return ok_status();
  }
  return Status::errorf(name, ": unsupported rope_scaling type '", type.empty() ? "(none given)" : type,
                        "' (supported: default, linear, llama3, yarn)");
}


// A float key that may be null (then absent: returns false).
Result<bool> opt_float(const json& j, const char* key, double& out, const std::string& name) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  TH_ASSIGN_OR_RETURN(out, float_key(j, key, -1, name));
  return true;
}

// Mistral / Mixtral: sliding_window (null: none) applies to every layer.
Status read_sliding_window(const json& j, const std::string& a, HfConfig& c, const std::string& name) {
  auto it = j.find("sliding_window");
  if (it == j.end() || it->is_null()) return ok_status();
  TH_ASSIGN_OR_RETURN(int64_t w, int_key(j, "sliding_window", -1, name));
  c.metadata.emplace_back(a + "attention.sliding_window", u32(w));
  return ok_status();
}

// Mixtral (num_local_experts, every expert a full FFN) and Qwen3-MoE (num_experts of
// moe_intermediate_size, every layer sparse, top-k weights renormalized).
Status read_experts(const json& j, const std::string& a, HfConfig& c, const std::string& name) {
  const bool qwen = c.arch->gguf_arch == "qwen3moe";
  TH_ASSIGN_OR_RETURN(c.n_expert, int_key(j, qwen ? "num_experts" : "num_local_experts", -1, name));
  if (c.n_expert > 4096) return Status::errorf(name, ": ", c.n_expert, " experts is past 4096");
  TH_ASSIGN_OR_RETURN(int64_t used, int_key(j, "num_experts_per_tok", -1, name));
  if (used > c.n_expert) return Status::errorf(name, ": num_experts_per_tok ", used, " is past the ", c.n_expert, " experts");
  c.n_ff_exp = c.n_ff;
  auto& m = c.metadata;
  m.emplace_back(a + "expert_count", u32(c.n_expert));
  m.emplace_back(a + "expert_used_count", u32(used));
  if (!qwen) return ok_status();
  TH_ASSIGN_OR_RETURN(c.n_ff_exp, int_key(j, "moe_intermediate_size", -1, name));
  m.emplace_back(a + "expert_feed_forward_length", u32(c.n_ff_exp));
  TH_ASSIGN_OR_RETURN(int64_t step, int_key(j, "decoder_sparse_step", 1, name));
  auto only = j.find("mlp_only_layers");
  if (step != 1 || (only != j.end() && !(only->is_array() && only->empty())))
    return Status::errorf(name, ": dense layers among the experts (decoder_sparse_step ", step,
                          ", mlp_only_layers) are not supported");
  auto norm = j.find("norm_topk_prob");
  if (norm == j.end() || !norm->is_boolean() || !norm->get<bool>())
    return Status::errorf(name, ": norm_topk_prob other than true is not supported");
  return ok_status();
}

// Gemma 2/3: the window, the soft-caps, the query scale, gemma3's layer pattern and local RoPE base.
Status read_gemma(const json& j, const std::string& a, HfConfig& c, const std::string& name) {
  const bool gemma2 = c.arch->gguf_arch == "gemma2";
  auto& m = c.metadata;
  TH_ASSIGN_OR_RETURN(int64_t window, int_key(j, "sliding_window", gemma2 ? 4096 : -1, name));
  m.emplace_back(a + "attention.sliding_window", u32(window));
  double v = 0;
  TH_ASSIGN_OR_RETURN(bool has_attn_cap, opt_float(j, "attn_logit_softcapping", v, name));
  if (has_attn_cap != gemma2)  // gemma2 always caps; gemma3 never (llama.cpp's gemma3.cpp has no cap)
    return Status::errorf(name, ": attn_logit_softcapping ", has_attn_cap ? "given" : "null", " is not supported for ",
                          c.arch->model_type);
  if (has_attn_cap) m.emplace_back(a + "attn_logit_softcapping", f32(v));
  TH_ASSIGN_OR_RETURN(bool has_final_cap, opt_float(j, "final_logit_softcapping", v, name));
  if (gemma2 && !has_final_cap) return Status::errorf(name, ": final_logit_softcapping null is not supported for gemma2");
  if (has_final_cap) m.emplace_back(a + "final_logit_softcapping", f32(v));
  TH_ASSIGN_OR_RETURN(bool has_scalar, opt_float(j, "query_pre_attn_scalar", v, name));
  if (has_scalar) m.emplace_back("tokenhive.attention.query_pre_attn_scalar", f32(v));
  if (gemma2) return ok_status();
  TH_ASSIGN_OR_RETURN(bool has_local, opt_float(j, "rope_local_base_freq", v, name));
  if (has_local) m.emplace_back(a + "rope.freq_base_swa", f32(v));
  // The layer pattern: layer_types (newer transformers) or sliding_window_pattern, as a period
  // p (layer l global when l % p == p - 1; 0: every layer local), which is what the model reads.
  if (auto lt = j.find("layer_types"); lt != j.end() && !lt->is_null()) {
    if (!lt->is_array() || static_cast<int64_t>(lt->size()) != c.n_layer)
      return Status::errorf(name, ": 'layer_types' is not an array of num_hidden_layers entries");
    std::vector<bool> global;
    for (const json& t : *lt) {
      if (!t.is_string() || (t != "sliding_attention" && t != "full_attention"))
        return Status::errorf(name, ": layer_types entry ", t.dump(), " is not sliding_attention or full_attention");
      global.push_back(t == "full_attention");
    }
    const auto first = std::find(global.begin(), global.end(), true);
    const int64_t period = first == global.end() ? 0 : (first - global.begin()) + 1;
    for (int64_t l = 0; l < c.n_layer; ++l)
      if (global[static_cast<size_t>(l)] != (period > 0 && l % period == period - 1))
        return Status::errorf(name, ": layer_types is not every n-th layer global (unsupported pattern)");
    m.emplace_back(a + "attention.sliding_window_pattern", u32(period));
  } else if (auto p = j.find("sliding_window_pattern"); p != j.end() && !p->is_null()) {
    TH_ASSIGN_OR_RETURN(int64_t period, int_key(j, "sliding_window_pattern", -1, name));
    m.emplace_back(a + "attention.sliding_window_pattern", u32(period));
  }
  return ok_status();
}

// A rope_scaling factor list of rope_dim / 2 positive numbers.
Result<std::vector<float>> factor_list(const json& r, const char* key, int64_t n, const std::string& name) {
  auto it = r.find(key);
  if (it == r.end() || !it->is_array() || static_cast<int64_t>(it->size()) != n)
    return Status::errorf(name, ": rope_scaling '", key, "' is not a list of ", n, " numbers (rope dimensions / 2)");
  std::vector<float> out;
  for (const json& v : *it) {
    if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() < 1e6))
      return Status::errorf(name, ": rope_scaling '", key, "' has ", v.dump(), ", not a positive number");
    out.push_back(static_cast<float>(v.get<double>()));
  }
  return out;
}

// Phi-3/4: partial_rotary_factor and LongRoPE (rope_scaling longrope/su: per-frequency divisors
// up to and past original_max_position_embeddings, cos/sin scaled by the attention factor),
// as llama.cpp's converter writes them (rope_factors_long/short.weight, rope.scaling.attn_factor).
Status read_phi3(const json& j, const std::string& a, HfConfig& c, int64_t n_ctx, const std::string& name) {
  double partial = 1.0;
  TH_ASSIGN_OR_RETURN(bool has_partial, opt_float(j, "partial_rotary_factor", partial, name));
  if (partial > 1) return Status::errorf(name, ": partial_rotary_factor ", partial, " is above 1");
  const int64_t rope_dim = has_partial ? static_cast<int64_t>(partial * static_cast<double>(c.n_embd)) / c.n_head : c.head_dim;
  if (rope_dim < 2 || rope_dim > c.head_dim || rope_dim % 2 != 0)
    return Status::errorf(name, ": partial_rotary_factor ", partial, " gives ", rope_dim, " rotated dimensions of ",
                          c.head_dim, " (not even, or out of range)");
  auto& m = c.metadata;
  m.emplace_back(a + "rope.dimension_count", u32(rope_dim));
  TH_ASSIGN_OR_RETURN(int64_t orig, int_key(j, "original_max_position_embeddings", n_ctx, name));
  m.emplace_back(a + "rope.scaling.original_context_length", u32(orig));
  auto it = j.find("rope_scaling");
  if (it == j.end() || it->is_null()) return ok_status();
  if (!it->is_object()) return Status::errorf(name, ": 'rope_scaling' is not an object");
  std::string type;
  for (const char* k : {"rope_type", "type"})
    if (it->contains(k) && (*it)[k].is_string()) type = (*it)[k].get<std::string>();
  if (type != "longrope" && type != "su")
    return Status::errorf(name, ": unsupported rope_scaling type '", type.empty() ? "(none given)" : type,
                          "' for phi3 (supported: longrope, su)");
  const double scale = static_cast<double>(n_ctx) / static_cast<double>(orig);
  if (scale > 1 && orig < 2)
    return Status::errorf(name, ": original_max_position_embeddings ", orig, " is too small for longrope");
  const double attn_factor = scale > 1 ? std::sqrt(1 + std::log(scale) / std::log(static_cast<double>(orig))) : 1.0;
  m.emplace_back(a + "rope.scaling.attn_factor", f32(attn_factor));
  TH_ASSIGN_OR_RETURN(std::vector<float> lf, factor_list(*it, "long_factor", rope_dim / 2, name));
  TH_ASSIGN_OR_RETURN(std::vector<float> sf, factor_list(*it, "short_factor", rope_dim / 2, name));
  c.extra_tensors.emplace_back("rope_factors_long.weight", std::move(lf));
  c.extra_tensors.emplace_back("rope_factors_short.weight", std::move(sf));
  return ok_status();
}

}  // namespace

const json& gemma3_text_defaults() {
  // Unsigned, as JSON's parser reads a non-negative integer (int_key asks for one).
  static const json d = {{"vocab_size", 262208u},           {"hidden_size", 2304u},
                         {"intermediate_size", 9216u},       {"num_hidden_layers", 26u},
                         {"num_attention_heads", 8u},        {"num_key_value_heads", 4u},
                         {"head_dim", 256u},                 {"hidden_activation", "gelu_pytorch_tanh"},
                         {"max_position_embeddings", 131072u}, {"rms_norm_eps", 1e-6},
                         {"rope_theta", 1000000.0},         {"query_pre_attn_scalar", 256u},
                         {"sliding_window", 4096u},          {"rope_local_base_freq", 10000.0},
                         {"sliding_window_pattern", 6u},     {"tie_word_embeddings", true}};
  return d;
}

namespace {
Result<HfConfig> text_model_config(const json& j, const std::string& name);
}  // namespace

Result<HfConfig> parse_hf_config(std::string_view text, const std::string& name) {
  const json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::errorf(name, ": not a JSON object");
  auto tc = j.find("text_config");
  if (j.value("model_type", json()) != "gemma3" || tc == j.end()) return text_model_config(j, name);
  // Gemma3ForConditionalGeneration: the text model is text_config over the top level's keys
  // over Gemma3TextConfig's defaults (as llama.cpp's converter merges them); its tensors are
  // language_model.*; vision_config and the vision tower's tensors are left alone.
  if (!tc->is_object()) return Status::errorf(name, ": 'text_config' is not an object");
  json t = gemma3_text_defaults();
  for (const auto& [k, v] : j.items())
    if (k != "text_config" && k != "vision_config") t[k] = v;
  for (const auto& [k, v] : tc->items()) t[k] = v;
  if (t["model_type"] != "gemma3" && t["model_type"] != "gemma3_text")
    return Status::errorf(name, ": text_config's model_type ", t["model_type"].dump(), " is not gemma3_text");
  t["model_type"] = "gemma3_text";
  TH_ASSIGN_OR_RETURN(HfConfig c, text_model_config(t, name + " (text_config)"));
  c.tensor_prefix = "language_model.";
  return c;
}

namespace {

Result<HfConfig> text_model_config(const json& j, const std::string& name) {
  HfConfig c;
  auto mt = j.find("model_type");
  if (mt == j.end() || !mt->is_string()) return Status::errorf(name, ": 'model_type' is missing");
  c.arch = find_hf_arch(mt->get<std::string>());
  if (!c.arch)
    return Status::errorf(name, ": unsupported model_type '", mt->get<std::string>(), "' (supported: ",
                          hf_arch_names(), ")");
  // Gemma names its activation hidden_activation (hidden_act is the older key).
  for (const char* key : {"hidden_activation", "hidden_act"}) {
    auto act = j.find(key);
    if (act == j.end() || act->is_null()) continue;
    if (!(act->is_string() && *act == c.arch->act))
      return Status::errorf(name, ": ", key, " ", act->dump(), " is not supported (", c.arch->act, ")");
    break;
  }
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

  // Qwen2/Qwen3's use_sliding_window puts windows on the layers from max_window_layers up,
  // which neither the GGUF keys nor llama.cpp's graphs express; every released config has
  // false, so true is refused rather than served without the windows.
  if (auto u = j.find("use_sliding_window"); u != j.end() && !u->is_null()) {
    if (!u->is_boolean()) return Status::errorf(name, ": 'use_sliding_window' is not a boolean");
    if (u->get<bool>())
      return Status::errorf(name, ": use_sliding_window true is not supported (sliding windows from max_window_layers on)");
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
  const bool phi3 = arch == "phi3";
  if (!phi3) m.emplace_back(a + "rope.dimension_count", u32(c.head_dim));
  m.emplace_back(a + "context_length", u32(n_ctx));
  m.emplace_back(a + "rope.freq_base", f32(theta));
  m.emplace_back(a + "attention.layer_norm_rms_epsilon", f32(eps));
  if (c.arch->rope_neox_unpermuted) m.emplace_back("tokenhive.rope.neox", GgufValue{GgufType::BOOL, true});
  if (phi3) {
    TH_RETURN_IF_ERROR(read_phi3(j, a, c, n_ctx, name));
  } else {
    TH_RETURN_IF_ERROR(read_rope_scaling(j, a, c, name));
  }
  if (c.arch->sliding_window) TH_RETURN_IF_ERROR(read_sliding_window(j, a, c, name));
  if (arch == "gemma2" || arch == "gemma3") TH_RETURN_IF_ERROR(read_gemma(j, a, c, name));
  if (c.arch->model_type == "mixtral" || arch == "qwen3moe") TH_RETURN_IF_ERROR(read_experts(j, a, c, name));
  return c;
}

}  // namespace

}  // namespace th
