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

}  // namespace

Result<SyntheticShape> synthetic_shape(std::string_view name) {
  if (name == "110m") return SyntheticShape{"110m", 768, 12, 12, 12, 2048, 1024};
  if (name == "1.1b") return SyntheticShape{"1.1b", 2048, 22, 32, 4, 5632, 2048};
  if (name == "7b") return SyntheticShape{"7b", 4096, 32, 32, 32, 11008, 4096};
  return Status::errorf("unknown shape '", name, "' (110m, 1.1b, 7b)");
}

Status write_synthetic_model(const SyntheticSpec& spec, const GgufFile& vocab, const std::string& path) {
  const SyntheticShape& s = spec.shape;
  TH_ASSIGN_OR_RETURN(const GgufArray* tokens, vocab.get_array("tokenizer.ggml.tokens"));
  const int64_t n_vocab = static_cast<int64_t>(tokens->strings.size());
  if (n_vocab == 0) return Status::errorf(vocab.name(), ": tokenizer.ggml.tokens is empty");
  if (s.n_embd % s.n_head != 0 || s.n_head % s.n_head_kv != 0)
    return Status::errorf("shape ", s.name, ": heads do not divide the embedding");
  const DTypeInfo& ti = dtype_info(spec.type);
  if (!ti.can_dequantize) return Status::errorf("type ", ti.name, " cannot be written");
  for (int64_t cols : {s.n_embd, s.n_ff})
    if (cols % ti.block_size != 0)
      return Status::errorf("shape ", s.name, ": row length ", cols, " is not a multiple of the ", ti.name,
                            " block size ", ti.block_size);

  const std::string arch = spec.arch == Arch::Qwen2 ? "qwen2" : "llama";
  const int64_t head_dim = s.n_embd / s.n_head;
  GgufWriter w;
  w.add_string("general.architecture", arch);
  w.add_string("general.name", "tokenhive synthetic " + s.name + " " + std::string(ti.name));
  w.add_u32(arch + ".context_length", static_cast<uint32_t>(s.n_ctx));
  w.add_u32(arch + ".embedding_length", static_cast<uint32_t>(s.n_embd));
  w.add_u32(arch + ".block_count", static_cast<uint32_t>(s.n_layer));
  w.add_u32(arch + ".feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.add_u32(arch + ".attention.head_count", static_cast<uint32_t>(s.n_head));
  w.add_u32(arch + ".attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.add_u32(arch + ".rope.dimension_count", static_cast<uint32_t>(head_dim));
  w.add_f32(arch + ".rope.freq_base", 10000.0f);
  w.add_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  for (const auto& [key, value] : vocab.metadata())
    if (key.rfind("tokenizer.", 0) == 0) w.add(key, value);

  // The matrices' scale 1/sqrt(fan_in) keeps each projection's output near its input's size;
  // RMSNorm before every block keeps the residual stream bounded.
  uint64_t tensor_key = splitmix64(spec.seed);
  auto matrix = [&](const std::string& name, int64_t cols, int64_t rows, DType type, float scale) {
    const uint64_t key = tensor_key = splitmix64(tensor_key);
    w.add_tensor_lazy(name, {cols, rows}, type,
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
  const float ff_scale = std::sqrt(3.0f / static_cast<float>(s.n_ff));
  matrix("token_embd.weight", s.n_embd, n_vocab, spec.type, 1.0f);
  vector("output_norm.weight", s.n_embd, 1.0f, 0.1f);
  if (!spec.tied_output) matrix("output.weight", s.n_embd, n_vocab, out_type, in_scale);
  const int64_t kv_dim = s.n_head_kv * head_dim;
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    vector(p + "attn_norm.weight", s.n_embd, 1.0f, 0.1f);
    matrix(p + "attn_q.weight", s.n_embd, s.n_embd, spec.type, in_scale);
    matrix(p + "attn_k.weight", s.n_embd, kv_dim, spec.type, in_scale);
    matrix(p + "attn_v.weight", s.n_embd, kv_dim, spec.type, in_scale);
    if (spec.arch == Arch::Qwen2) {
      vector(p + "attn_q.bias", s.n_embd, 0.0f, 0.5f);
      vector(p + "attn_k.bias", kv_dim, 0.0f, 0.5f);
      vector(p + "attn_v.bias", kv_dim, 0.0f, 0.5f);
    }
    matrix(p + "attn_output.weight", s.n_embd, s.n_embd, spec.type, in_scale);
    vector(p + "ffn_norm.weight", s.n_embd, 1.0f, 0.1f);
    matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff, spec.type, in_scale);
    matrix(p + "ffn_up.weight", s.n_embd, s.n_ff, spec.type, in_scale);
    matrix(p + "ffn_down.weight", s.n_ff, s.n_embd, spec.type, ff_scale);
  }
  return w.write(path);
}

}  // namespace th
