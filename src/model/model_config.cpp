#include "model/model_config.h"

#include <algorithm>
#include <cmath>

#include "format/gguf.h"

namespace th {

namespace {

// Bounds that no real model approaches: a value past them is a corrupt file,
// and refusing it keeps later allocations sane.
constexpr int64_t kMaxEmbd = 1 << 16;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxFf = 1 << 20;

Result<int64_t> get_dim(const GgufFile& f, const std::string& key, int64_t lo, int64_t hi) {
  TH_ASSIGN_OR_RETURN(uint64_t v, f.get_uint(key));
  if (v < static_cast<uint64_t>(lo) || v > static_cast<uint64_t>(hi))
    return Status::errorf(f.name(), ": ", key, " = ", v, " is outside [", lo, ", ", hi, "]");
  return static_cast<int64_t>(v);
}

// The architectures, each as llama.cpp builds its graph (src/models/<arch>.cpp at
// upstream 82bb48500) and its converter writes its GGUF.
constexpr ArchSpec kArchs[] = {
    {.name = "llama", .arch = Arch::Llama, .moe = true},  // Llama 1/2/3, Mistral; Mixtral when expert_count > 0
    {.name = "qwen2", .arch = Arch::Qwen2, .rope_neox = true, .qkv_bias = true},
    {.name = "qwen3", .arch = Arch::Qwen3, .rope_neox = true, .qk_norm = true},
    {.name = "qwen3moe", .arch = Arch::Qwen3Moe, .rope_neox = true, .qk_norm = true, .moe = true},
    {.name = "gemma2", .arch = Arch::Gemma2, .rope_neox = true, .post_norms = true, .embd_scale = true,
     .output_is_embd = true, .act = FfnAct::GeluTanh, .swa_period = 2},
    {.name = "gemma3", .arch = Arch::Gemma3, .rope_neox = true, .qk_norm = true, .post_norms = true,
     .embd_scale = true, .act = FfnAct::GeluTanh, .swa_period = 6},
    {.name = "phi3", .arch = Arch::Phi3, .rope_neox = true, .fused_qkv = true, .fused_gate_up = true},
};

Result<float> get_positive(const GgufFile& f, const std::string& key, double hi) {
  TH_ASSIGN_OR_RETURN(double v, f.get_float(key));
  if (!(v > 0 && v < hi)) return Status::errorf(f.name(), ": ", key, " = ", v, " is not in (0, ", hi, ")");
  return static_cast<float>(v);
}

// Sliding-window layers, gemma's softcaps and query scale, as llama.cpp's gemma2.cpp/gemma3.cpp read them.
Status read_gemma(const GgufFile& f, const std::string& a, ModelConfig& c) {
  const bool gemma2 = c.arch == Arch::Gemma2;
  if (gemma2) {
    c.sliding_window = 4096;  // Gemma 2's window when the file does not say
    c.attn_softcap = 50.0f;   // and its soft-caps (llama.cpp's defaults)
    c.final_softcap = 30.0f;
    if (f.has(a + "attn_logit_softcapping")) {
      TH_ASSIGN_OR_RETURN(c.attn_softcap, get_positive(f, a + "attn_logit_softcapping", 1e6));
    }
  }
  if (f.has(a + "final_logit_softcapping")) {
    TH_ASSIGN_OR_RETURN(c.final_softcap, get_positive(f, a + "final_logit_softcapping", 1e6));
  }
  if (f.has(a + "attention.sliding_window")) {
    TH_ASSIGN_OR_RETURN(c.sliding_window, get_dim(f, a + "attention.sliding_window", 0, int64_t{1} << 24));
  }
  int64_t period = c.spec->swa_period;
  // A scalar period, as llama.cpp reads it (get_key_or_arr into a uint32_t: an array there
  // is passed over and the default kept, so the same here).
  if (f.has(a + "attention.sliding_window_pattern") && !f.get_array(a + "attention.sliding_window_pattern").ok()) {
    TH_ASSIGN_OR_RETURN(period, get_dim(f, a + "attention.sliding_window_pattern", 0, kMaxLayers));
  }
  // Layer l is global when l % period == period - 1 (llama.cpp's set_swa_pattern); period 0: all local.
  for (int64_t l = 0; l < c.n_layer; ++l)
    c.layer_swa[static_cast<size_t>(l)] = period == 0 || l % period < period - 1;
  c.rope_freq_base_swa = gemma2 ? c.rope_freq_base : 10000.0f;
  c.rope_freq_scale_swa = gemma2 ? c.rope_freq_scale : 1.0f;
  if (f.has(a + "rope.freq_base_swa")) {
    TH_ASSIGN_OR_RETURN(c.rope_freq_base_swa, get_positive(f, a + "rope.freq_base_swa", 1e12));
  }
  // Gemma's query_pre_attn_scalar is not in the GGUF: it is head_dim except for the 27B
  // models (46 layers for Gemma 2, 62 for Gemma 3), where it is n_embd / n_head (144, 168).
  const bool is_27b = c.n_layer == (gemma2 ? 46 : 62);
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(is_27b ? c.n_embd / c.n_head : c.head_dim));
  // A Hugging Face folder's config.json says it (format/hf_config.cpp).
  if (f.has("tokenhive.attention.query_pre_attn_scalar")) {
    TH_ASSIGN_OR_RETURN(float scalar, get_positive(f, "tokenhive.attention.query_pre_attn_scalar", 1e9));
    c.attn_scale = 1.0f / std::sqrt(scalar);
  }
  return ok_status();
}

Status read_experts(const GgufFile& f, const std::string& a, ModelConfig& c) {
  if (f.has(a + "expert_count")) {
    TH_ASSIGN_OR_RETURN(c.n_expert, get_dim(f, a + "expert_count", 0, 4096));
  }
  if (c.n_expert == 0) {
    if (c.arch == Arch::Qwen3Moe) return Status::errorf(f.name(), ": ", a, "expert_count is missing or 0");
    return ok_status();
  }
  TH_ASSIGN_OR_RETURN(c.n_expert_used, get_dim(f, a + "expert_used_count", 1, c.n_expert));
  c.n_ff_exp = c.n_ff;  // mixtral: every expert is a full FFN
  if (f.has(a + "expert_feed_forward_length")) {
    TH_ASSIGN_OR_RETURN(c.n_ff_exp, get_dim(f, a + "expert_feed_forward_length", 1, kMaxFf));
  } else if (c.arch == Arch::Qwen3Moe) {
    c.n_ff_exp = c.n_ff / c.n_expert_used;  // llama.cpp's fallback
  }
  return ok_status();
}

// Llama 3.1's rope_scaling as keys (what the factors in a GGUF's rope_freqs.weight are made from).
Status read_llama3_scaling(const GgufFile& f, const std::string& a, ModelConfig& c) {
  TH_ASSIGN_OR_RETURN(float factor, get_positive(f, a + "rope.scaling.factor", 1e6));
  TH_ASSIGN_OR_RETURN(float lo, get_positive(f, a + "rope.scaling.low_freq_factor", 1e6));
  TH_ASSIGN_OR_RETURN(float hi, get_positive(f, a + "rope.scaling.high_freq_factor", 1e6));
  TH_ASSIGN_OR_RETURN(int64_t orig, get_dim(f, a + "rope.scaling.original_context_length", 1, int64_t{1} << 24));
  if (!(hi > lo)) return Status::errorf(f.name(), ": rope.scaling.high_freq_factor is not above low_freq_factor");
  c.rope_freqs = llama3_rope_freq_factors(c.rope_dim, c.rope_freq_base, factor, lo, hi, orig);
  return ok_status();
}

// YaRN (rope.scaling.type "yarn", as Qwen2.5/Qwen3 long-context configs): each frequency
// pair i blends interpolation (divided by `factor`) and extrapolation (kept) by a ramp
// between the correction dimensions of beta_fast and beta_slow rotations over the original
// context, and cos/sin are scaled by 1 + 0.1 ln(factor). As ggml's rope_yarn computes it
// (theta = theta_extrap * (freq_scale (1 - mix) + mix)), expressed as divisors of each
// frequency (what rope_freqs holds) and the attention factor.
Status read_yarn_scaling(const GgufFile& f, const std::string& a, ModelConfig& c) {
  TH_ASSIGN_OR_RETURN(float factor, get_positive(f, a + "rope.scaling.factor", 1e6));
  if (factor < 1) return Status::errorf(f.name(), ": rope.scaling.factor ", factor, " is below 1 (yarn)");
  int64_t orig = c.n_ctx_train;
  if (f.has(a + "rope.scaling.original_context_length")) {
    TH_ASSIGN_OR_RETURN(orig, get_dim(f, a + "rope.scaling.original_context_length", 1, int64_t{1} << 24));
  }
  float beta_fast = 32.0f, beta_slow = 1.0f;  // llama.cpp's (and Hugging Face's) defaults
  if (f.has(a + "rope.scaling.yarn_beta_fast")) {
    TH_ASSIGN_OR_RETURN(beta_fast, get_positive(f, a + "rope.scaling.yarn_beta_fast", 1e6));
  }
  if (f.has(a + "rope.scaling.yarn_beta_slow")) {
    TH_ASSIGN_OR_RETURN(beta_slow, get_positive(f, a + "rope.scaling.yarn_beta_slow", 1e6));
  }
  for (const char* k : {"rope.scaling.yarn_ext_factor", "rope.scaling.yarn_attn_factor", "rope.scaling.yarn_log_multiplier"})
    if (f.has(a + k)) return Status::errorf(f.name(), ": ", a, k, " is not supported (yarn with its defaults only)");
  const double n_dims = static_cast<double>(c.rope_dim), base = c.rope_freq_base;
  auto corr_dim = [&](double rotations) {
    return n_dims * std::log(static_cast<double>(orig) / (rotations * 2 * M_PI)) / (2 * std::log(base));
  };
  const double low = std::max(0.0, std::floor(corr_dim(beta_fast)));
  const double high = std::min(n_dims - 1, std::ceil(corr_dim(beta_slow)));
  c.rope_freqs.clear();
  for (int64_t i = 0; i < c.rope_dim / 2; ++i) {
    const double y = (static_cast<double>(i) - low) / std::max(0.001, high - low);
    const double mix = 1 - std::min(1.0, std::max(0.0, y));  // 1: extrapolate (keep), 0: interpolate
    c.rope_freqs.push_back(static_cast<float>(1 / ((1 - mix) / factor + mix)));
  }
  c.rope_attn_factor *= static_cast<float>(1 + 0.1 * std::log(static_cast<double>(factor)));
  return ok_status();
}

}  // namespace

const ArchSpec* find_arch(std::string_view name) {
  for (const ArchSpec& s : kArchs)
    if (s.name == name) return &s;
  return nullptr;
}

const ArchSpec& arch_spec(Arch arch) {
  for (const ArchSpec& s : kArchs)
    if (s.arch == arch) return s;
  return kArchs[0];  // unreachable: every Arch has a row
}

std::string supported_arch_names() {
  std::string out;
  for (const ArchSpec& s : kArchs) out += (out.empty() ? "" : ", ") + std::string(s.name);
  return out;
}

Result<ModelConfig> config_from_gguf(const GgufFile& f) {
  ModelConfig c;
  TH_ASSIGN_OR_RETURN(c.arch_name, f.get_string("general.architecture"));
  c.spec = find_arch(c.arch_name);
  if (!c.spec)
    return Status::errorf(f.name(), ": unsupported architecture '", c.arch_name, "' (supported: ",
                          supported_arch_names(), ")");
  c.arch = c.spec->arch;
  c.rope_neox = c.spec->rope_neox;
  // Set by a Hugging Face folder (format/hf_config.cpp): its llama q/k rows are not permuted
  // for adjacent-pair RoPE as llama.cpp's converter does, so they rotate halves instead.
  if (f.has("tokenhive.rope.neox")) {
    TH_ASSIGN_OR_RETURN(c.rope_neox, f.get_bool("tokenhive.rope.neox"));
  }
  const std::string a = c.arch_name + ".";
  TH_ASSIGN_OR_RETURN(c.n_embd, get_dim(f, a + "embedding_length", 1, kMaxEmbd));
  TH_ASSIGN_OR_RETURN(c.n_layer, get_dim(f, a + "block_count", 1, kMaxLayers));
  TH_ASSIGN_OR_RETURN(c.n_head, get_dim(f, a + "attention.head_count", 1, kMaxHeads));
  c.n_head_kv = c.n_head;
  if (f.has(a + "attention.head_count_kv")) {
    TH_ASSIGN_OR_RETURN(c.n_head_kv, get_dim(f, a + "attention.head_count_kv", 1, c.n_head));
  }
  if (c.n_head % c.n_head_kv != 0)
    return Status::errorf(f.name(), ": head_count ", c.n_head, " is not a multiple of head_count_kv ", c.n_head_kv);
  c.head_dim = c.n_embd / c.n_head;
  if (f.has(a + "attention.key_length")) {
    TH_ASSIGN_OR_RETURN(c.head_dim, get_dim(f, a + "attention.key_length", 1, kMaxEmbd));
  } else if (c.n_embd % c.n_head != 0) {
    return Status::errorf(f.name(), ": embedding_length ", c.n_embd, " is not a multiple of head_count ", c.n_head);
  }
  if (f.has(a + "attention.value_length")) {
    TH_ASSIGN_OR_RETURN(int64_t vl, get_dim(f, a + "attention.value_length", 1, kMaxEmbd));
    if (vl != c.head_dim)
      return Status::errorf(f.name(), ": value_length ", vl, " differs from key_length ", c.head_dim, " (unsupported)");
  }
  TH_ASSIGN_OR_RETURN(c.n_ff, get_dim(f, a + "feed_forward_length", 1, kMaxFf));
  c.n_ctx_train = 2048;
  if (f.has(a + "context_length")) {
    TH_ASSIGN_OR_RETURN(c.n_ctx_train, get_dim(f, a + "context_length", 1, int64_t{1} << 24));
  }
  if (f.has(a + "attention.layer_norm_rms_epsilon")) {
    TH_ASSIGN_OR_RETURN(double eps, f.get_float(a + "attention.layer_norm_rms_epsilon"));
    if (!(eps > 0 && eps < 1)) return Status::errorf(f.name(), ": layer_norm_rms_epsilon ", eps, " is not in (0, 1)");
    c.rms_eps = static_cast<float>(eps);
  }
  c.rope_dim = c.head_dim;
  if (f.has(a + "rope.dimension_count")) {
    TH_ASSIGN_OR_RETURN(c.rope_dim, get_dim(f, a + "rope.dimension_count", 2, c.head_dim));
    if (c.rope_dim % 2 != 0) return Status::errorf(f.name(), ": rope.dimension_count ", c.rope_dim, " is odd");
  }
  if (f.has(a + "rope.freq_base")) {
    TH_ASSIGN_OR_RETURN(double base, f.get_float(a + "rope.freq_base"));
    if (!(base > 1 && std::isfinite(base))) return Status::errorf(f.name(), ": rope.freq_base ", base, " is not > 1");
    c.rope_freq_base = static_cast<float>(base);
  }
  if (f.has(a + "rope.scaling.type")) {
    TH_ASSIGN_OR_RETURN(std::string type, f.get_string(a + "rope.scaling.type"));
    if (type == "linear") {
      TH_ASSIGN_OR_RETURN(double factor, f.get_float(a + "rope.scaling.factor"));
      if (!(factor >= 1 && factor < 1e6)) return Status::errorf(f.name(), ": rope.scaling.factor ", factor, " is not >= 1");
      c.rope_freq_scale = static_cast<float>(1.0 / factor);
    } else if (type == "llama3") {
      TH_RETURN_IF_ERROR(read_llama3_scaling(f, a, c));
    } else if (type == "yarn" && c.arch != Arch::Phi3) {
      TH_RETURN_IF_ERROR(read_yarn_scaling(f, a, c));
    } else if (type == "longrope" && c.arch == Arch::Phi3) {
      // Carried by the rope_factors_long/short tensors and rope.scaling.attn_factor.
    } else if (type != "none") {
      return Status::errorf(f.name(), ": unsupported rope.scaling.type '", type,
                            "' (none, linear, llama3 and yarn are supported; phi3: longrope)");
    }
  }
  if (f.has(a + "rope.scaling.attn_factor")) {  // times yarn's own factor, as llama.cpp multiplies them
    TH_ASSIGN_OR_RETURN(float attn_factor, get_positive(f, a + "rope.scaling.attn_factor", 1e3));
    c.rope_attn_factor *= attn_factor;
  }
  c.rope_orig_ctx = c.n_ctx_train;
  if (f.has(a + "rope.scaling.original_context_length")) {
    TH_ASSIGN_OR_RETURN(c.rope_orig_ctx, get_dim(f, a + "rope.scaling.original_context_length", 1, int64_t{1} << 24));
  }
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  c.layer_swa.assign(static_cast<size_t>(c.n_layer), 0);
  if (c.arch == Arch::Gemma2 || c.arch == Arch::Gemma3) TH_RETURN_IF_ERROR(read_gemma(f, a, c));
  // Mistral 7B v0.1's window (4096) on every layer. llama.cpp's llama graph has none (its
  // converter does not write the key for llama), so a file carrying it is ours or mkmodel's.
  if (c.arch == Arch::Llama && f.has(a + "attention.sliding_window")) {
    TH_ASSIGN_OR_RETURN(c.sliding_window, get_dim(f, a + "attention.sliding_window", 0, int64_t{1} << 24));
    c.layer_swa.assign(static_cast<size_t>(c.n_layer), c.sliding_window > 0);
    c.rope_freq_base_swa = c.rope_freq_base;  // the window changes no layer's RoPE
    c.rope_freq_scale_swa = c.rope_freq_scale;
  }
  if (c.spec->moe) TH_RETURN_IF_ERROR(read_experts(f, a, c));
  const GgufTensor* embd = f.tensor("token_embd.weight");
  if (!embd) return Status::errorf(f.name(), ": missing tensor 'token_embd.weight'");
  if (embd->dims.size() != 2 || embd->dims[0] != c.n_embd)
    return Status::errorf(f.name(), ": tensor 'token_embd.weight' has row length ", embd->dims[0],
                          ", expected embedding_length ", c.n_embd);
  c.n_vocab = embd->dims[1];
  return c;
}

std::vector<float> llama3_rope_freq_factors(int64_t rope_dim, float freq_base, float factor,
                                            float low_freq_factor, float high_freq_factor,
                                            int64_t original_context) {
  // Meta's apply_scaling: long wavelengths are slowed by `factor`, short ones kept,
  // and the band between interpolated smoothly.
  const double low_freq_wavelen = static_cast<double>(original_context) / low_freq_factor;
  const double high_freq_wavelen = static_cast<double>(original_context) / high_freq_factor;
  std::vector<float> out;
  for (int64_t i = 0; i < rope_dim; i += 2) {
    const double freq = 1.0 / std::pow(static_cast<double>(freq_base), static_cast<double>(i) / rope_dim);
    const double wavelen = 2 * M_PI / freq;
    double f;
    if (wavelen < high_freq_wavelen) {
      f = 1;
    } else if (wavelen > low_freq_wavelen) {
      f = factor;
    } else {
      const double smooth = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      f = 1 / ((1 - smooth) / factor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

}  // namespace th
