#include "model/llama_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>
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

// A 3-D expert tensor [cols, rows, n_expert] as its first expert's matrix.
Result<WeightView> experts(const GgufFile& f, const std::string& name, int64_t cols, int64_t rows, int64_t n_expert) {
  const GgufTensor* t = f.tensor(name);
  if (!t) return Status::errorf(f.name(), ": missing tensor '", name, "'");
  if (t->dims.size() != 3 || t->dims[0] != cols || t->dims[1] != rows || t->dims[2] != n_expert)
    return Status::errorf(f.name(), ": tensor '", name, "' has ", t->dims.size(), " dimensions [", t->dims[0],
                          t->dims.size() > 1 ? ", " + std::to_string(t->dims[1]) : std::string(),
                          t->dims.size() > 2 ? ", " + std::to_string(t->dims[2]) : std::string(), "], expected [",
                          cols, ", ", rows, ", ", n_expert, "]");
  if (!dtype_info(t->type).can_dequantize)
    return Status::errorf(f.name(), ": tensor '", name, "' has type ", dtype_name(t->type),
                          ", which tokenhive cannot compute with");
  return WeightView{t->type, rows, cols, t->data};
}

// Rows [first, first + n) of a matrix: how a fused tensor (phi3's attn_qkv, its ffn_up
// holding gate then up) is split into the matrices the forward pass multiplies by.
WeightView row_slice(const WeightView& w, int64_t first, int64_t n) {
  return WeightView{w.type, n, w.cols,
                    static_cast<const uint8_t*>(w.data) + static_cast<size_t>(first) * row_bytes(w.type, w.cols)};
}

}  // namespace

WeightView LlamaModel::expert(const WeightView& first, int64_t e) {
  return WeightView{first.type, first.rows, first.cols,
                    static_cast<const uint8_t*>(first.data) +
                        static_cast<size_t>(e * first.rows) * row_bytes(first.type, first.cols)};
}

Result<std::unique_ptr<LlamaModel>> LlamaModel::load(const GgufFile& f, Backend& backend, int64_t n_ctx,
                                                     Communicator* comm) {
  TH_ASSIGN_OR_RETURN(ModelConfig cfg, config_from_gguf(f));
  std::unique_ptr<LlamaModel> m(new LlamaModel(cfg, backend));
  const ModelConfig& c = m->cfg_;
  const ArchSpec& A = *c.spec;

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
  if (f.tensor("output.weight") && !A.output_is_embd) {
    TH_ASSIGN_OR_RETURN(m->output_, matrix(f, "output.weight", c.n_embd, c.n_vocab));
  } else {
    m->output_ = m->tok_embd_;  // tied embeddings
  }
  TH_ASSIGN_OR_RETURN(m->rope_freqs_, vec("rope_freqs.weight", c.rope_dim / 2, false));
  if (!m->rope_freqs_ && !c.rope_freqs.empty()) m->rope_freqs_ = c.rope_freqs.data();  // llama3 scaling keys
  if (c.arch == Arch::Phi3 && !m->rope_freqs_) {
    // LongRoPE: one set of factors up to the original context, the other beyond it.
    const bool long_ctx = (n_ctx > 0 ? n_ctx : c.n_ctx_train) > c.rope_orig_ctx;
    const std::string name = long_ctx ? "rope_factors_long.weight" : "rope_factors_short.weight";
    TH_ASSIGN_OR_RETURN(m->rope_freqs_, vec(name, c.rope_dim / 2, false));
  }

  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    Layer L;
    TH_ASSIGN_OR_RETURN(L.attn_norm, vec(p + "attn_norm.weight", c.n_embd, true));
    if (A.fused_qkv && !f.tensor(p + "attn_qkv.weight") && !f.tensor(p + "attn_q.weight"))
      return Status::errorf(f.name(), ": missing tensor '", p, "attn_qkv.weight' (nor are there attn_q/k/v)");
    if (A.fused_qkv && f.tensor(p + "attn_qkv.weight")) {
      TH_ASSIGN_OR_RETURN(WeightView qkv, matrix(f, p + "attn_qkv.weight", c.n_embd, c.q_dim() + 2 * c.kv_dim()));
      L.wq = row_slice(qkv, 0, c.q_dim());
      L.wk = row_slice(qkv, c.q_dim(), c.kv_dim());
      L.wv = row_slice(qkv, c.q_dim() + c.kv_dim(), c.kv_dim());
    } else {
      TH_ASSIGN_OR_RETURN(L.wq, matrix(f, p + "attn_q.weight", c.n_embd, c.q_dim()));
      TH_ASSIGN_OR_RETURN(L.wk, matrix(f, p + "attn_k.weight", c.n_embd, c.kv_dim()));
      TH_ASSIGN_OR_RETURN(L.wv, matrix(f, p + "attn_v.weight", c.n_embd, c.kv_dim()));
    }
    TH_ASSIGN_OR_RETURN(L.wo, matrix(f, p + "attn_output.weight", c.q_dim(), c.n_embd));
    TH_ASSIGN_OR_RETURN(L.bq, vec(p + "attn_q.bias", c.q_dim(), A.qkv_bias));
    TH_ASSIGN_OR_RETURN(L.bk, vec(p + "attn_k.bias", c.kv_dim(), A.qkv_bias));
    TH_ASSIGN_OR_RETURN(L.bv, vec(p + "attn_v.bias", c.kv_dim(), A.qkv_bias));
    if (A.qk_norm) {
      TH_ASSIGN_OR_RETURN(L.q_norm, vec(p + "attn_q_norm.weight", c.head_dim, true));
      TH_ASSIGN_OR_RETURN(L.k_norm, vec(p + "attn_k_norm.weight", c.head_dim, true));
    }
    if (A.post_norms) {
      TH_ASSIGN_OR_RETURN(L.attn_post_norm, vec(p + "post_attention_norm.weight", c.n_embd, true));
      TH_ASSIGN_OR_RETURN(L.ffn_post_norm, vec(p + "post_ffw_norm.weight", c.n_embd, true));
    }
    TH_ASSIGN_OR_RETURN(L.ffn_norm, vec(p + "ffn_norm.weight", c.n_embd, true));
    if (c.n_expert > 0) {
      TH_ASSIGN_OR_RETURN(L.router, matrix(f, p + "ffn_gate_inp.weight", c.n_embd, c.n_expert));
      TH_ASSIGN_OR_RETURN(L.gate_exps, experts(f, p + "ffn_gate_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert));
      TH_ASSIGN_OR_RETURN(L.up_exps, experts(f, p + "ffn_up_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert));
      TH_ASSIGN_OR_RETURN(L.down_exps, experts(f, p + "ffn_down_exps.weight", c.n_ff_exp, c.n_embd, c.n_expert));
    } else if (A.fused_gate_up) {
      TH_ASSIGN_OR_RETURN(WeightView gate_up, matrix(f, p + "ffn_up.weight", c.n_embd, 2 * c.n_ff));
      L.w_gate = row_slice(gate_up, 0, c.n_ff);
      L.w_up = row_slice(gate_up, c.n_ff, c.n_ff);
    } else {
      TH_ASSIGN_OR_RETURN(L.w_gate, matrix(f, p + "ffn_gate.weight", c.n_embd, c.n_ff));
      TH_ASSIGN_OR_RETURN(L.w_up, matrix(f, p + "ffn_up.weight", c.n_embd, c.n_ff));
    }
    if (c.n_expert == 0) {
      TH_ASSIGN_OR_RETURN(L.w_down, matrix(f, p + "ffn_down.weight", c.n_ff, c.n_embd));
    }
    m->layers_.push_back(L);
  }
  if (comm) TH_RETURN_IF_ERROR(m->shard(*comm));  // tensor_parallel.cpp
  for (Layer& L : m->layers_)
    for (WeightView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.router})
      if (w->data) *w = backend.prepare_weight(*w);
  if (!comm || comm->rank() == 0) m->output_ = backend.prepare_weight(m->output_);  // only rank 0 reads it
  return m;
}

LlamaModel::~LlamaModel() { free_buffers(); }

void LlamaModel::free_buffers() {
  for (float* p : {x_, h_, q_, k_, v_, attn_, o_, gate_, up_, logits_, router_, moe_in_, moe_out_})
    if (p) backend_->free(p);
  x_ = h_ = q_ = k_ = v_ = attn_ = o_ = gate_ = up_ = logits_ = router_ = moe_in_ = moe_out_ = nullptr;
  capacity_ = 0;
}

void LlamaModel::ensure_capacity(int64_t n) {
  if (n <= capacity_) return;
  free_buffers();
  Backend& b = *backend_;
  const ModelConfig& c = cfg_;
  const int64_t ff = std::max(c.n_ff, c.n_ff_exp);
  x_ = b.alloc(n * c.n_embd);
  h_ = b.alloc(n * std::max(c.n_embd, c.q_dim()));
  q_ = b.alloc(n * c.q_dim());
  k_ = b.alloc(n * c.kv_dim());
  v_ = b.alloc(n * c.kv_dim());
  attn_ = b.alloc(n * c.q_dim());
  o_ = b.alloc(n * c.n_embd);
  gate_ = b.alloc(n * ff);
  up_ = b.alloc(n * ff);
  logits_ = b.alloc(n * c.n_vocab);
  if (c.n_expert > 0) {
    router_ = b.alloc(n * c.n_expert);
    moe_in_ = b.alloc(n * c.n_embd);
    moe_out_ = b.alloc(n * c.n_embd);
  }
  capacity_ = n;
}

// h_ holds the normed input; the block's output goes to o_.
void LlamaModel::attention_block(const Layer& L, int64_t l, int64_t n, const ForwardBatch& batch, KvCache& kv,
                                 const AttentionBatch& ab) {
  Backend& b = *backend_;
  const ModelConfig& c = cfg_;
  const bool swa = c.is_swa(l);
  const KvLayerView kvl = kv.layer(l);
  b.prefetch_attention(kvl, ab, swa ? c.sliding_window : 0);
  b.matmuls(qkv_jobs(L), h_, n);
  const MatmulJob o[] = {{&L.wo, o_}};
  b.prefetch_products(o, n);  // rope, the KV write and attention come first
  if (L.bq) b.add_bias(q_, L.bq, n, c.q_dim());
  if (L.bk) b.add_bias(k_, L.bk, n, c.kv_dim());
  if (L.bv) b.add_bias(v_, L.bv, n, c.kv_dim());
  if (L.q_norm) b.rmsnorm(q_, L.q_norm, q_, n * c.n_head, c.head_dim, c.rms_eps);  // one row per head
  if (L.k_norm) b.rmsnorm(k_, L.k_norm, k_, n * c.n_head_kv, c.head_dim, c.rms_eps);
  // Sliding-window layers rotate with their own base and scaling (gemma3's local layers: 10000, none).
  const RopeParams rope{c.rope_dim, swa ? c.rope_freq_base_swa : c.rope_freq_base,
                        swa ? c.rope_freq_scale_swa : c.rope_freq_scale, c.rope_neox, rope_freqs_};
  b.rope(q_, batch.pos.data(), n, c.n_head, c.head_dim, rope);
  b.rope(k_, batch.pos.data(), n, c.n_head_kv, c.head_dim, rope);
  b.kv_write(kvl, ab, k_, v_);
  // RoPE's attn_factor scales q's and k's cos/sin, so every score by its square.
  const float scale = c.attn_scale * c.rope_attn_factor * c.rope_attn_factor;
  const AttentionOptions opt{swa ? c.sliding_window : 0, c.attn_softcap};
  b.attention(kvl, ab, q_, attn_, c.n_head, c.n_head_kv, c.head_dim, scale, opt);
  b.matmul(L.wo, attn_, o_, n);
  if (c.n_expert == 0) b.prefetch_products(gate_up_jobs(L), n);  // after the residual add and a norm
  reduce(o_, n * c.n_embd);  // tensor parallelism: each rank's heads gave a partial sum
}

// h_ holds the normed input; the output goes to o_.
void LlamaModel::ffn_block(const Layer& L, int64_t n) {
  Backend& b = *backend_;
  const ModelConfig& c = cfg_;
  if (c.n_expert > 0) return moe_block(L, n);
  b.matmuls(gate_up_jobs(L), h_, n);
  const MatmulJob down[] = {{&L.w_down, o_}};
  b.prefetch_products(down, n);
  if (c.spec->act == FfnAct::GeluTanh) {
    b.geglu(gate_, up_, gate_, n * c.n_ff);
  } else {
    b.swiglu(gate_, up_, gate_, n * c.n_ff);
  }
  b.matmul(L.w_down, gate_, o_, n);
  reduce(o_, n * c.n_embd);
}

// Mixture of experts: the router's softmax over all experts, the top k kept and their
// weights renormalized to sum 1 (Mixtral; Qwen3-MoE with norm_topk_prob, as llama.cpp runs
// both); then per expert, the tokens routed to it gathered into one batch, so each expert's
// matrices are read once per step, and its outputs added back weighted.
void LlamaModel::moe_block(const Layer& L, int64_t n) {
  Backend& b = *backend_;
  const ModelConfig& c = cfg_;
  const int64_t E = c.n_expert, K = c.n_expert_used;
  b.matmul(L.router, h_, router_, n);
  router_host_.resize(static_cast<size_t>(n * E));
  b.read(router_, router_host_.data(), n * E);
  std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(E));
  std::vector<std::vector<float>> weights(static_cast<size_t>(E));
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < n; ++t) {
    const float* r = router_host_.data() + t * E;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int32_t x, int32_t y) { return r[x] > r[y] || (r[x] == r[y] && x < y); });
    // softmax over the top k = softmax over all, restricted to the top k, renormalized.
    const float mx = r[order[0]];
    double sum = 0;
    for (int64_t j = 0; j < K; ++j) sum += std::exp(static_cast<double>(r[order[static_cast<size_t>(j)]] - mx));
    for (int64_t j = 0; j < K; ++j) {
      const int32_t e = order[static_cast<size_t>(j)];
      tokens[static_cast<size_t>(e)].push_back(static_cast<int32_t>(t));
      weights[static_cast<size_t>(e)].push_back(static_cast<float>(std::exp(static_cast<double>(r[e] - mx)) / sum));
    }
  }
  b.scale(o_, n * c.n_embd, 0.0f);  // o_ = 0 (its values are finite), then each expert adds its share
  for (int64_t e = 0; e < E; ++e) {
    const std::vector<int32_t>& idx = tokens[static_cast<size_t>(e)];
    const int64_t m = static_cast<int64_t>(idx.size());
    if (m == 0) continue;
    b.gather_rows(h_, idx.data(), m, c.n_embd, moe_in_);
    const WeightView gate = expert(L.gate_exps, e), up = expert(L.up_exps, e);
    const MatmulJob gate_up[] = {{&gate, gate_}, {&up, up_}};
    b.matmuls(gate_up, moe_in_, m);
    b.swiglu(gate_, up_, gate_, m * c.n_ff_exp);
    b.matmul(expert(L.down_exps, e), gate_, moe_out_, m);
    b.add_rows_scaled(o_, moe_out_, idx.data(), weights[static_cast<size_t>(e)].data(), m, c.n_embd);
  }
}

Status LlamaModel::forward(const ForwardBatch& batch, KvCache& kv, std::vector<float>* logits, ComputeType type,
                           std::vector<float>* hidden) {
  const ModelConfig& c = cfg_;
  const int set = weight_set(type);
  if (set < 0) return Status::errorf("forward: compute type ", compute_type_name(type), " is not loaded");
  const std::vector<Layer>& layers = set == 0 ? layers_ : copies_[static_cast<size_t>(set - 1)].layers;
  const WeightView& output = set == 0 ? output_ : copies_[static_cast<size_t>(set - 1)].output;
  const int64_t n = static_cast<int64_t>(batch.size());
  if (n == 0) return ok_status();
  if (batch.seq.size() != batch.ids.size() || batch.pos.size() != batch.ids.size() ||
      batch.want_logits.size() != batch.ids.size() || (!batch.want_hidden.empty() && batch.want_hidden.size() != batch.ids.size()))
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
    slots[static_cast<size_t>(t)] = static_cast<int32_t>(kv_slot(table, kv.block_size(), p));
  }

  if (comm_ && comm_->size() > 1 && comm_->rank() == 0) TH_RETURN_IF_ERROR(send_plan(batch, type, kv));
  ensure_capacity(n);
  Backend& b = *backend_;
  const AttentionBatch ab{n, batch.seq.data(), batch.pos.data(), slots.data(),
                          std::span<const std::span<const int32_t>>(batch.tables), kv.block_size()};

  b.embed(tok_embd_, batch.ids.data(), n, x_);
  if (c.spec->embd_scale) b.scale(x_, n * c.n_embd, std::sqrt(static_cast<float>(c.n_embd)));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const Layer& L = layers[static_cast<size_t>(l)];
    b.rmsnorm(x_, L.attn_norm, h_, n, c.n_embd, c.rms_eps);
    b.prefetch(L.ffn_norm, c.n_embd);  // each next norm's weights, while a block's products run
    attention_block(L, l, n, batch, kv, ab);
    if (L.attn_post_norm) {
      b.rmsnorm(o_, L.attn_post_norm, h_, n, c.n_embd, c.rms_eps);
      b.add(x_, h_, n * c.n_embd);
    } else {
      b.add(x_, o_, n * c.n_embd);
    }
    b.rmsnorm(x_, L.ffn_norm, h_, n, c.n_embd, c.rms_eps);
    b.prefetch(l + 1 < c.n_layer ? layers[static_cast<size_t>(l + 1)].attn_norm : output_norm_, c.n_embd);
    ffn_block(L, n);
    if (l + 1 < c.n_layer) {  // the next layer's q/k/v come after the residual add and a norm
      b.prefetch_products(qkv_jobs(layers[static_cast<size_t>(l + 1)]), n);
    } else {
      const MatmulJob out[] = {{&output, logits_}};
      b.prefetch_products(out, n);
    }
    if (L.ffn_post_norm) {
      b.rmsnorm(o_, L.ffn_post_norm, h_, n, c.n_embd, c.rms_eps);
      b.add(x_, h_, n * c.n_embd);
    } else {
      b.add(x_, o_, n * c.n_embd);
    }
  }
  TH_RETURN_IF_ERROR(comm_status_);

  // Only the rows that want logits go through the final norm and the (large) output matrix.
  std::vector<int32_t> rows;
  for (int64_t t = 0; t < n; ++t)
    if (batch.want_logits[t]) rows.push_back(static_cast<int32_t>(t));
  const int64_t m = static_cast<int64_t>(rows.size());
  logits->resize(static_cast<size_t>(m * c.n_vocab));
  if (m > 0) {
    b.gather_rows(x_, rows.data(), m, c.n_embd, o_);
    b.rmsnorm(o_, output_norm_, h_, m, c.n_embd, c.rms_eps);
    b.matmul(output, h_, logits_, m);
    if (c.final_softcap > 0) b.softcap(logits_, m * c.n_vocab, c.final_softcap);
    b.read(logits_, logits->data(), m * c.n_vocab);
  }
  if (hidden) final_hidden(batch, *hidden);
  return ok_status();
}

// The rows that want hidden states, through the output norm (x_ still holds every token's
// last residual), read back. Done after the logits, whose buffers it reuses.
void LlamaModel::final_hidden(const ForwardBatch& batch, std::vector<float>& hidden) {
  const ModelConfig& c = cfg_;
  std::vector<int32_t> rows;
  for (size_t t = 0; t < batch.want_hidden.size(); ++t)
    if (batch.want_hidden[t]) rows.push_back(static_cast<int32_t>(t));
  const int64_t m = static_cast<int64_t>(rows.size());
  hidden.resize(static_cast<size_t>(m * c.n_embd));
  if (m == 0) return;
  Backend& b = *backend_;
  b.gather_rows(x_, rows.data(), m, c.n_embd, o_);
  b.rmsnorm(o_, output_norm_, h_, m, c.n_embd, c.rms_eps);
  b.read(h_, hidden.data(), m * c.n_embd);
}

}  // namespace th
