#include "model/model_config.h"

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

}  // namespace

Result<ModelConfig> config_from_gguf(const GgufFile& f) {
  ModelConfig c;
  TH_ASSIGN_OR_RETURN(c.arch_name, f.get_string("general.architecture"));
  if (c.arch_name == "llama") {
    c.arch = Arch::Llama;
  } else if (c.arch_name == "qwen2") {
    c.arch = Arch::Qwen2;
    c.rope_neox = true;
  } else {
    return Status::errorf(f.name(), ": unsupported architecture '", c.arch_name, "' (llama and qwen2 are supported)");
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
    } else if (type != "none") {
      return Status::errorf(f.name(), ": unsupported rope.scaling.type '", type, "'");
    }
  }
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
