#include "model/llama_model.h"

#include <cmath>
#include <string>

#include "format/gguf.h"
#include "tensor/quant.h"

namespace th {

namespace {

Result<WeightView> matrix(const GgufFile& f, const std::string& name, int64_t cols, int64_t rows) {
  const GgufTensor* t = f.tensor(name);
  if (!t) return Status::errorf(f.name(), ": missing tensor '", name, "'");
  if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows)
    return Status::errorf(f.name(), ": tensor '", name, "' has shape [", t->dims[0],
                          t->dims.size() > 1 ? ", " + std::to_string(t->dims[1]) : std::string(),
                          "], expected [", cols, ", ", rows, "]");
  if (!dtype_info(t->type).can_dequantize)
    return Status::errorf(f.name(), ": tensor '", name, "' has type ", dtype_name(t->type),
                          ", which tokenhive cannot compute with");
  return WeightView{t->type, rows, cols, t->data};
}

}  // namespace

Result<std::unique_ptr<LlamaModel>> LlamaModel::load(const GgufFile& f, Backend& backend) {
  TH_ASSIGN_OR_RETURN(ModelConfig cfg, config_from_gguf(f));
  std::unique_ptr<LlamaModel> m(new LlamaModel(cfg, backend));
  const ModelConfig& c = m->cfg_;

  // A 1-D f32 vector (norm weight, bias) of length n; other float types are dequantized once.
  auto vec = [&](const std::string& name, int64_t n, bool required) -> Result<const float*> {
    const GgufTensor* t = f.tensor(name);
    if (!t) {
      if (!required) return static_cast<const float*>(nullptr);
      return Status::errorf(f.name(), ": missing tensor '", name, "'");
    }
    if (t->dims.size() != 1 || t->dims[0] != n)
      return Status::errorf(f.name(), ": tensor '", name, "' has ", t->dims.size() == 1 ? t->dims[0] : t->n_elements(),
                            " elements in ", t->dims.size(), " dimensions, expected a vector of ", n);
    if (t->type == DType::F32) return reinterpret_cast<const float*>(t->data);
    if (!dtype_info(t->type).can_dequantize)
      return Status::errorf(f.name(), ": tensor '", name, "' has unsupported type ", dtype_name(t->type));
    m->owned_.emplace_back(static_cast<size_t>(n));
    dequantize_row(t->type, t->data, m->owned_.back().data(), n);
    return static_cast<const float*>(m->owned_.back().data());
  };

  TH_ASSIGN_OR_RETURN(m->tok_embd_, matrix(f, "token_embd.weight", c.n_embd, c.n_vocab));
  TH_ASSIGN_OR_RETURN(m->output_norm_, vec("output_norm.weight", c.n_embd, true));
  if (f.tensor("output.weight")) {
    TH_ASSIGN_OR_RETURN(m->output_, matrix(f, "output.weight", c.n_embd, c.n_vocab));
  } else {
    m->output_ = m->tok_embd_;  // tied embeddings
  }
  TH_ASSIGN_OR_RETURN(m->rope_freqs_, vec("rope_freqs.weight", c.rope_dim / 2, false));

  const bool qkv_bias = c.arch == Arch::Qwen2;
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    Layer L;
    TH_ASSIGN_OR_RETURN(L.attn_norm, vec(p + "attn_norm.weight", c.n_embd, true));
    TH_ASSIGN_OR_RETURN(L.wq, matrix(f, p + "attn_q.weight", c.n_embd, c.q_dim()));
    TH_ASSIGN_OR_RETURN(L.wk, matrix(f, p + "attn_k.weight", c.n_embd, c.kv_dim()));
    TH_ASSIGN_OR_RETURN(L.wv, matrix(f, p + "attn_v.weight", c.n_embd, c.kv_dim()));
    TH_ASSIGN_OR_RETURN(L.wo, matrix(f, p + "attn_output.weight", c.q_dim(), c.n_embd));
    TH_ASSIGN_OR_RETURN(L.bq, vec(p + "attn_q.bias", c.q_dim(), qkv_bias));
    TH_ASSIGN_OR_RETURN(L.bk, vec(p + "attn_k.bias", c.kv_dim(), qkv_bias));
    TH_ASSIGN_OR_RETURN(L.bv, vec(p + "attn_v.bias", c.kv_dim(), qkv_bias));
    TH_ASSIGN_OR_RETURN(L.ffn_norm, vec(p + "ffn_norm.weight", c.n_embd, true));
    TH_ASSIGN_OR_RETURN(L.w_gate, matrix(f, p + "ffn_gate.weight", c.n_embd, c.n_ff));
    TH_ASSIGN_OR_RETURN(L.w_up, matrix(f, p + "ffn_up.weight", c.n_embd, c.n_ff));
    TH_ASSIGN_OR_RETURN(L.w_down, matrix(f, p + "ffn_down.weight", c.n_ff, c.n_embd));
    m->layers_.push_back(L);
  }
  return m;
}

LlamaModel::~LlamaModel() { free_buffers(); }

void LlamaModel::free_buffers() {
  for (float* p : {x_, h_, q_, k_, v_, attn_, o_, gate_, up_, logits_})
    if (p) backend_->free(p);
  x_ = h_ = q_ = k_ = v_ = attn_ = o_ = gate_ = up_ = logits_ = nullptr;
  capacity_ = 0;
}

void LlamaModel::ensure_capacity(int64_t n) {
  if (n <= capacity_) return;
  free_buffers();
  Backend& b = *backend_;
  const ModelConfig& c = cfg_;
  x_ = b.alloc(n * c.n_embd);
  h_ = b.alloc(n * std::max(c.n_embd, c.q_dim()));
  q_ = b.alloc(n * c.q_dim());
  k_ = b.alloc(n * c.kv_dim());
  v_ = b.alloc(n * c.kv_dim());
  attn_ = b.alloc(n * c.q_dim());
  o_ = b.alloc(n * c.n_embd);
  gate_ = b.alloc(n * c.n_ff);
  up_ = b.alloc(n * c.n_ff);
  logits_ = b.alloc(n * c.n_vocab);
  capacity_ = n;
}

Status LlamaModel::forward(const ForwardBatch& batch, KvCache& kv, std::vector<float>* logits, ComputeType type) {
  const ModelConfig& c = cfg_;
  const int set = weight_set(type);
  if (set < 0) return Status::errorf("forward: compute type ", compute_type_name(type), " is not loaded");
  const std::vector<Layer>& layers = set == 0 ? layers_ : copies_[static_cast<size_t>(set - 1)].layers;
  const WeightView& output = set == 0 ? output_ : copies_[static_cast<size_t>(set - 1)].output;
  const int64_t n = static_cast<int64_t>(batch.size());
  if (n == 0) return ok_status();
  if (batch.seq.size() != batch.ids.size() || batch.pos.size() != batch.ids.size() ||
      batch.want_logits.size() != batch.ids.size())
    return Status::error("forward: batch vectors differ in length");

  // Slots for every token; validate ids, positions and tables before any work.
  std::vector<int32_t> slots(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = batch.ids[t], s = batch.seq[t], p = batch.pos[t];
    if (id < 0 || id >= c.n_vocab) return Status::errorf("forward: token id ", id, " is outside the vocabulary");
    if (s < 0 || static_cast<size_t>(s) >= batch.tables.size())
      return Status::errorf("forward: token ", t, " names sequence ", s, " with no block table");
    const auto& table = batch.tables[static_cast<size_t>(s)];
    if (p < 0 || p / kv.block_size() >= static_cast<int64_t>(table.size()))
      return Status::errorf("forward: position ", p, " has no reserved KV block");
    slots[static_cast<size_t>(t)] = static_cast<int32_t>(table[static_cast<size_t>(p / kv.block_size())] *
                                                         kv.block_size() + p % kv.block_size());
  }

  ensure_capacity(n);
  Backend& b = *backend_;
  const AttentionBatch ab{n, batch.seq.data(), batch.pos.data(), slots.data(),
                          std::span<const std::span<const int32_t>>(batch.tables), kv.block_size()};
  RopeParams rope{c.rope_dim, c.rope_freq_base, c.rope_freq_scale, c.rope_neox, rope_freqs_};
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  b.embed(tok_embd_, batch.ids.data(), n, x_);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const Layer& L = layers[static_cast<size_t>(l)];
    b.rmsnorm(x_, L.attn_norm, h_, n, c.n_embd, c.rms_eps);
    b.matmul(L.wq, h_, q_, n);
    b.matmul(L.wk, h_, k_, n);
    b.matmul(L.wv, h_, v_, n);
    if (L.bq) b.add_bias(q_, L.bq, n, c.q_dim());
    if (L.bk) b.add_bias(k_, L.bk, n, c.kv_dim());
    if (L.bv) b.add_bias(v_, L.bv, n, c.kv_dim());
    b.rope(q_, batch.pos.data(), n, c.n_head, c.head_dim, rope);
    b.rope(k_, batch.pos.data(), n, c.n_head_kv, c.head_dim, rope);
    const KvLayerView kvl = kv.layer(l);
    b.kv_write(kvl, ab, k_, v_);
    b.attention(kvl, ab, q_, attn_, c.n_head, c.n_head_kv, c.head_dim, scale);
    b.matmul(L.wo, attn_, o_, n);
    b.add(x_, o_, n * c.n_embd);

    b.rmsnorm(x_, L.ffn_norm, h_, n, c.n_embd, c.rms_eps);
    b.matmul(L.w_gate, h_, gate_, n);
    b.matmul(L.w_up, h_, up_, n);
    b.swiglu(gate_, up_, gate_, n * c.n_ff);
    b.matmul(L.w_down, gate_, o_, n);
    b.add(x_, o_, n * c.n_embd);
  }

  // Only the rows that want logits go through the final norm and the (large) output matrix.
  std::vector<int32_t> rows;
  for (int64_t t = 0; t < n; ++t)
    if (batch.want_logits[t]) rows.push_back(static_cast<int32_t>(t));
  const int64_t m = static_cast<int64_t>(rows.size());
  logits->resize(static_cast<size_t>(m * c.n_vocab));
  if (m == 0) return ok_status();
  b.gather_rows(x_, rows.data(), m, c.n_embd, o_);
  b.rmsnorm(o_, output_norm_, h_, m, c.n_embd, c.rms_eps);
  b.matmul(output, h_, logits_, m);
  b.read(logits_, logits->data(), m * c.n_vocab);
  return ok_status();
}

}  // namespace th
