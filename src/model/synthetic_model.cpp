#include "model/synthetic_model.h"

#include <cmath>
#include <thread>
#include <vector>

#include "format/gguf.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"

namespace th {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1), a pure function of (key, i) so rows can be filled in parallel.
float uniform_pm1(uint64_t key, uint64_t i) {
  return static_cast<float>(splitmix64(key ^ splitmix64(i)) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

// Fills rows x cols of `type` with uniform values of the given scale, quantizing row by row.
void fill_matrix(uint8_t* dst, DType type, int64_t rows, int64_t cols, uint64_t key, float scale) {
  const size_t rb = row_bytes(type, cols);
  const unsigned n_threads = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  std::vector<std::thread> workers;
  for (unsigned w = 0; w < n_threads; ++w) {
    workers.emplace_back([=] {
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = w; r < rows; r += n_threads) {
        for (int64_t c = 0; c < cols; ++c)
          row[static_cast<size_t>(c)] = scale * uniform_pm1(key, static_cast<uint64_t>(r * cols + c));
        quantize_row(type, row.data(), dst + static_cast<size_t>(r) * rb, cols);
      }
    });
  }
  for (auto& t : workers) t.join();
}

// The keys llama.cpp's converter (convert_hf_to_gguf.py) writes for the architecture.
void add_hparams(GgufWriter& w, const SyntheticSpec& spec, const ArchSpec& A, int64_t head_dim, float rope_base,
                 int64_t n_ff_exp) {
  const SyntheticShape& s = spec.shape;
  const std::string arch(A.name);
  const DTypeInfo& ti = dtype_info(spec.type);
  const bool gemma = spec.arch == Arch::Gemma2 || spec.arch == Arch::Gemma3;
  w.add_string("general.architecture", arch);
  w.add_string("general.name", "tokenhive synthetic " + s.name + " " + std::string(ti.name));
  // Phi-3 128k switches to its long RoPE factors past its original 4096 of 131072 positions;
  // here the original is the shape's context and the whole 4x that (llama.cpp rounds a
  // context up to a multiple of 256, so the tiny shape's 256 is the least that can be short).
  // YaRN likewise: x4 past an original context of the shape's (llama.cpp's converter writes
  // type, factor and original context for a Qwen2.5 config's rope_scaling).
  const int64_t n_ctx = spec.arch == Arch::Phi3 || spec.yarn ? 4 * s.n_ctx : s.n_ctx;
  w.add_u32(arch + ".context_length", static_cast<uint32_t>(n_ctx));
  w.add_u32(arch + ".embedding_length", static_cast<uint32_t>(s.n_embd));
  w.add_u32(arch + ".block_count", static_cast<uint32_t>(s.n_layer));
  w.add_u32(arch + ".feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.add_u32(arch + ".attention.head_count", static_cast<uint32_t>(s.n_head));
  w.add_u32(arch + ".attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  if (s.head_dim > 0) {
    w.add_u32(arch + ".attention.key_length", static_cast<uint32_t>(head_dim));
    w.add_u32(arch + ".attention.value_length", static_cast<uint32_t>(head_dim));
  }
  w.add_u32(arch + ".rope.dimension_count", static_cast<uint32_t>(head_dim));
  w.add_f32(arch + ".rope.freq_base", rope_base);
  w.add_f32(arch + ".attention.layer_norm_rms_epsilon", gemma ? 1e-6f : 1e-5f);
  // A window shorter than the tests' sequences, so that the local layers differ from global ones.
  const uint32_t window = s.name == "tiny" ? 5 : 4096;
  if (spec.yarn) {
    w.add_string(arch + ".rope.scaling.type", "yarn");
    w.add_f32(arch + ".rope.scaling.factor", 4.0f);
    w.add_u32(arch + ".rope.scaling.original_context_length", static_cast<uint32_t>(s.n_ctx));
  }
  if (spec.sliding_window > 0) w.add_u32(arch + ".attention.sliding_window", static_cast<uint32_t>(spec.sliding_window));
  if (spec.arch == Arch::Gemma2) {
    w.add_u32(arch + ".attention.sliding_window", window);
    w.add_f32(arch + ".attn_logit_softcapping", 50.0f);
    w.add_f32(arch + ".final_logit_softcapping", 30.0f);
  }
  if (spec.arch == Arch::Gemma3) {
    w.add_u32(arch + ".attention.sliding_window", window);
    w.add_string(arch + ".rope.scaling.type", "linear");  // Gemma 3 4B+: global layers' positions / 8
    w.add_f32(arch + ".rope.scaling.factor", 8.0f);
  }
  // attn_factor sqrt(1 + ln(ratio) / ln(original)), as the converter computes it.
  const int64_t phi3_orig_ctx = s.n_ctx;
  if (spec.arch == Arch::Phi3) {
    w.add_u32(arch + ".rope.scaling.original_context_length", static_cast<uint32_t>(phi3_orig_ctx));
    w.add_f32(arch + ".rope.scaling.attn_factor",
              static_cast<float>(std::sqrt(1 + std::log(4.0) / std::log(static_cast<double>(phi3_orig_ctx)))));
  }
  if (spec.n_expert > 0) {
    w.add_u32(arch + ".expert_count", static_cast<uint32_t>(spec.n_expert));
    w.add_u32(arch + ".expert_used_count", static_cast<uint32_t>(spec.n_expert_used));
  }
  if (spec.arch == Arch::Qwen3Moe) w.add_u32(arch + ".expert_feed_forward_length", static_cast<uint32_t>(n_ff_exp));
}

// Llama 3.1's rope scaling (its config.json's rope_scaling).
constexpr float kLlama3Factor = 8.0f, kLlama3LowFreq = 1.0f, kLlama3HighFreq = 4.0f;
constexpr int64_t kLlama3OrigCtx = 8192;

}  // namespace

std::string synthetic_hf_rope_scaling(const SyntheticSpec& spec) {
  if (!spec.llama3_rope) return "";
  return "{\"rope_type\": \"llama3\", \"factor\": " + std::to_string(kLlama3Factor) +
         ", \"low_freq_factor\": " + std::to_string(kLlama3LowFreq) + ", \"high_freq_factor\": " +
         std::to_string(kLlama3HighFreq) + ", \"original_max_position_embeddings\": " + std::to_string(kLlama3OrigCtx) +
         "}";
}

Result<SyntheticShape> synthetic_shape(std::string_view name) {
  if (name == "tiny") return SyntheticShape{"tiny", 64, 2, 4, 2, 128, 256, 0};
  if (name == "110m") return SyntheticShape{"110m", 768, 12, 12, 12, 2048, 1024};
  if (name == "1.1b") return SyntheticShape{"1.1b", 2048, 22, 32, 4, 5632, 2048};
  if (name == "7b") return SyntheticShape{"7b", 4096, 32, 32, 32, 11008, 4096};
  return Status::errorf("unknown shape '", name, "' (tiny, 110m, 1.1b, 7b)");
}

Status apply_synthetic_arch(std::string_view name, SyntheticSpec& spec) {
  if (name == "mixtral") {
    spec.arch = Arch::Llama;
    spec.n_expert = spec.shape.name == "tiny" ? 4 : 8;
    spec.n_expert_used = 2;
    return ok_status();
  }
  if (name == "mistral") {
    spec.arch = Arch::Llama;
    spec.sliding_window = spec.shape.name == "tiny" ? 5 : 4096;
    return ok_status();
  }
  if (name == "qwen2-yarn") {
    spec.arch = Arch::Qwen2;
    spec.yarn = true;
    return ok_status();
  }
  if (name == "llama3") {
    spec.arch = Arch::Llama;
    spec.llama3_rope = true;
    return ok_status();
  }
  const ArchSpec* a = find_arch(name);
  if (!a) return Status::errorf("unknown --arch '", name, "' (", supported_arch_names(), ", mixtral, llama3, mistral, qwen2-yarn)");
  spec.arch = a->arch;
  if (a->arch == Arch::Qwen3Moe) {
    spec.n_expert = spec.shape.name == "tiny" ? 4 : 8;
    spec.n_expert_used = 2;
  }
  if (a->arch == Arch::Gemma3 && spec.shape.name == "tiny") spec.shape.n_layer = 6;  // 5 local + 1 global
  // Qwen3 and Gemma have heads wider than n_embd / n_head (Qwen3-0.6B: 16 x 128 over 1024).
  if ((a->qk_norm || a->post_norms) && spec.shape.name == "tiny") spec.shape.head_dim = 32;
  return ok_status();
}

Status write_synthetic_model(const SyntheticSpec& spec, const GgufFile& vocab, const std::string& path) {
  const SyntheticShape& s = spec.shape;
  TH_ASSIGN_OR_RETURN(const GgufArray* tokens, vocab.get_array("tokenizer.ggml.tokens"));
  const int64_t n_vocab = static_cast<int64_t>(tokens->strings.size());
  if (n_vocab == 0) return Status::errorf(vocab.name(), ": tokenizer.ggml.tokens is empty");
  if (s.n_head % s.n_head_kv != 0 || (s.head_dim == 0 && s.n_embd % s.n_head != 0))
    return Status::errorf("shape ", s.name, ": heads do not divide the embedding");
  const DTypeInfo& ti = dtype_info(spec.type);
  if (!ti.can_dequantize) return Status::errorf("type ", ti.name, " cannot be written");
  const int64_t head_dim = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  const int64_t q_dim = s.n_head * head_dim, kv_dim = s.n_head_kv * head_dim;
  for (int64_t cols : {s.n_embd, s.n_ff, q_dim})
    if (cols % ti.block_size != 0)
      return Status::errorf("shape ", s.name, ": row length ", cols, " is not a multiple of the ", ti.name,
                            " block size ", ti.block_size);
  const ArchSpec& A = arch_spec(spec.arch);
  if (spec.n_expert > 0 && !A.moe) return Status::errorf("architecture ", A.name, " has no experts");
  if (spec.arch == Arch::Qwen3Moe && spec.n_expert == 0) return Status::error("qwen3moe needs experts");
  if (spec.sliding_window > 0 && spec.arch != Arch::Llama) return Status::error("a sliding window on every layer is llama's (mistral)");

  const std::string arch(A.name);
  // (mistral: 1e6 as Mistral v0.2+, so that a window layer's RoPE differing from the model's shows)
  const float rope_base = spec.llama3_rope                                    ? 500000.0f
                          : spec.arch == Arch::Gemma3 || spec.sliding_window > 0 ? 1000000.0f
                                                                              : 10000.0f;
  const int64_t n_ff_exp = spec.arch == Arch::Qwen3Moe ? s.n_ff / 2 : s.n_ff;
  GgufWriter w;
  add_hparams(w, spec, A, head_dim, rope_base, n_ff_exp);
  for (const auto& [key, value] : vocab.metadata())
    if (key.rfind("tokenizer.", 0) == 0) w.add(key, value);

  // The matrices' scale 1/sqrt(fan_in) keeps each projection's output near its input's size;
  // RMSNorm before every block keeps the residual stream bounded.
  uint64_t tensor_key = splitmix64(spec.seed);
  auto matrix = [&](const std::string& name, std::vector<int64_t> dims, DType type, float scale) {
    const uint64_t key = tensor_key = splitmix64(tensor_key);
    int64_t rows = 1;
    for (size_t i = 1; i < dims.size(); ++i) rows *= dims[i];
    const int64_t cols = dims[0];
    w.add_tensor_lazy(name, std::move(dims), type,
                      [=](uint8_t* dst, size_t) { fill_matrix(dst, type, rows, cols, key, scale); });
  };
  auto vector = [&](const std::string& name, int64_t n, float base, float jitter) {
    const uint64_t key = tensor_key = splitmix64(tensor_key);
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = base + jitter * uniform_pm1(key, static_cast<uint64_t>(i));
    w.add_tensor(name, {n}, DType::F32, v.data(), v.size() * sizeof(float));
  };
  // Files of 4 bits or fewer (as llama-quantize writes Q2_K, Q3_K_M, Q4_K_M, IQ4_NL, IQ4_XS)
  // keep the output matrix at higher precision.
  const bool low_bit = spec.type == DType::Q2_K || spec.type == DType::Q3_K || spec.type == DType::Q4_K ||
                       spec.type == DType::IQ4_NL || spec.type == DType::IQ4_XS;
  // (iq4_nl rows need only be a multiple of 32: then q8_0, as llama-quantize falls back too.)
  const DType out_type = !low_bit ? spec.type : s.n_embd % kQKK == 0 ? DType::Q6_K : DType::Q8_0;
  const float in_scale = std::sqrt(3.0f / static_cast<float>(s.n_embd));
  const float q_scale = std::sqrt(3.0f / static_cast<float>(q_dim));
  const float ff_scale = std::sqrt(3.0f / static_cast<float>(s.n_ff));
  matrix("token_embd.weight", {s.n_embd, n_vocab}, spec.type, 1.0f);
  vector("output_norm.weight", s.n_embd, 1.0f, 0.1f);
  if (!spec.tied_output && spec.arch != Arch::Gemma2) matrix("output.weight", {s.n_embd, n_vocab}, out_type, in_scale);
  if (spec.llama3_rope) {
    const std::vector<float> f = llama3_rope_freq_factors(head_dim, rope_base, kLlama3Factor, kLlama3LowFreq,
                                                          kLlama3HighFreq, kLlama3OrigCtx);
    w.add_tensor("rope_freqs.weight", {head_dim / 2}, DType::F32, f.data(), f.size() * sizeof(float));
  }
  if (spec.arch == Arch::Phi3) {
    vector("rope_factors_long.weight", head_dim / 2, 4.0f, 3.0f);  // divisors in [1, 7]
    vector("rope_factors_short.weight", head_dim / 2, 1.0f, 0.05f);
  }
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    vector(p + "attn_norm.weight", s.n_embd, 1.0f, 0.1f);
    if (A.fused_qkv) {
      matrix(p + "attn_qkv.weight", {s.n_embd, q_dim + 2 * kv_dim}, spec.type, in_scale);
    } else {
      matrix(p + "attn_q.weight", {s.n_embd, q_dim}, spec.type, in_scale);
      matrix(p + "attn_k.weight", {s.n_embd, kv_dim}, spec.type, in_scale);
      matrix(p + "attn_v.weight", {s.n_embd, kv_dim}, spec.type, in_scale);
    }
    if (A.qkv_bias) {
      vector(p + "attn_q.bias", q_dim, 0.0f, 0.5f);
      vector(p + "attn_k.bias", kv_dim, 0.0f, 0.5f);
      vector(p + "attn_v.bias", kv_dim, 0.0f, 0.5f);
    }
    if (A.qk_norm) {
      vector(p + "attn_q_norm.weight", head_dim, 1.0f, 0.1f);
      vector(p + "attn_k_norm.weight", head_dim, 1.0f, 0.1f);
    }
    matrix(p + "attn_output.weight", {q_dim, s.n_embd}, spec.type, q_scale);
    if (A.post_norms) vector(p + "post_attention_norm.weight", s.n_embd, 1.0f, 0.1f);
    vector(p + "ffn_norm.weight", s.n_embd, 1.0f, 0.1f);
    if (spec.n_expert > 0) {
      matrix(p + "ffn_gate_inp.weight", {s.n_embd, spec.n_expert}, DType::F32, in_scale);
      matrix(p + "ffn_gate_exps.weight", {s.n_embd, n_ff_exp, spec.n_expert}, spec.type, in_scale);
      matrix(p + "ffn_up_exps.weight", {s.n_embd, n_ff_exp, spec.n_expert}, spec.type, in_scale);
      matrix(p + "ffn_down_exps.weight", {n_ff_exp, s.n_embd, spec.n_expert}, spec.type,
             std::sqrt(3.0f / static_cast<float>(n_ff_exp)));
    } else if (A.fused_gate_up) {
      matrix(p + "ffn_up.weight", {s.n_embd, 2 * s.n_ff}, spec.type, in_scale);
      matrix(p + "ffn_down.weight", {s.n_ff, s.n_embd}, spec.type, ff_scale);
    } else {
      matrix(p + "ffn_gate.weight", {s.n_embd, s.n_ff}, spec.type, in_scale);
      matrix(p + "ffn_up.weight", {s.n_embd, s.n_ff}, spec.type, in_scale);
      matrix(p + "ffn_down.weight", {s.n_ff, s.n_embd}, spec.type, ff_scale);
    }
    if (A.post_norms) vector(p + "post_ffw_norm.weight", s.n_embd, 1.0f, 0.1f);
  }
  return w.write(path);
}

}  // namespace th
