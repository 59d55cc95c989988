// The decoder's forward pass for every architecture of model_config.h's table
// (llama: Llama 1/2/3, Mistral, Mixtral; qwen2; qwen3; qwen3moe; gemma2;
// gemma3; phi3), written as plain C++ over a Backend: embed (x sqrt(n_embd)
// for gemma) -> per layer [RMSNorm -> QKV (biases; per-head q/k RMSNorm) ->
// RoPE -> attention over the paged KV cache (sliding window, soft-cap) ->
// output projection (post-norm) -> residual -> RMSNorm -> gated FFN (SwiGLU
// or GeGLU; or the top-k of a mixture of experts) (post-norm) -> residual] ->
// RMSNorm -> output projection (tied to the embedding when the file has no
// output.weight; soft-capped for gemma2).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"
#include "kv/kv_cache.h"
#include "model/model_config.h"

namespace th {

class GgufFile;

/// @brief One forward pass's tokens: a ragged batch over several sequences.
struct ForwardBatch {
  std::vector<int32_t> ids;
  std::vector<int32_t> seq;          // index into tables
  std::vector<int32_t> pos;          // position within its sequence
  std::vector<uint8_t> want_logits;  // 1: return this token's logits
  std::vector<uint8_t> want_hidden;  // empty, or per token 1: return its final hidden state (embeddings)
  std::vector<std::span<const int32_t>> tables;  // per sequence: its KV block table

  void add(int32_t id, int32_t s, int32_t p, bool logits) {
    ids.push_back(id);
    seq.push_back(s);
    pos.push_back(p);
    want_logits.push_back(logits ? 1 : 0);
  }
  size_t size() const { return ids.size(); }
};

class LlamaModel {
 public:
  /// @brief Resolves every tensor the architecture needs, checking names, shapes and types.
  /// The file must outlive the model (weights stay in its mapping).
  /// n_ctx: the longest sequence the caller will run (0: the training context); phi3 picks
  /// its long RoPE factors when it exceeds rope.scaling.original_context_length, as llama.cpp.
  static Result<std::unique_ptr<LlamaModel>> load(const GgufFile& f, Backend& backend, int64_t n_ctx = 0);
  ~LlamaModel();

  const ModelConfig& config() const { return cfg_; }

  /// @brief Runs the batch; logits of the tokens with want_logits, in batch order,
  /// n_vocab floats each, go to *logits. Every position a token attends to must
  /// already be in the cache or earlier in this batch, and every slot reserved.
  /// With `hidden`, the final hidden states (after the output norm: what the output matrix
  /// reads) of the tokens with want_hidden go there, in batch order, n_embd floats each.
  Status forward(const ForwardBatch& batch, KvCache& kv, std::vector<float>* logits,
                 std::vector<float>* hidden = nullptr);

 private:
  struct Layer {
    const float* attn_norm = nullptr;
    WeightView wq, wk, wv, wo;
    const float *bq = nullptr, *bk = nullptr, *bv = nullptr;
    const float *q_norm = nullptr, *k_norm = nullptr;  // per head (head_dim)
    const float *attn_post_norm = nullptr, *ffn_post_norm = nullptr;
    const float* ffn_norm = nullptr;
    WeightView w_gate, w_up, w_down;
    WeightView router;                    // n_expert x n_embd
    WeightView gate_exps, up_exps, down_exps;  // expert 0's matrix; experts follow at expert_stride
  };
  // Expert e's matrix within a 3-D expert tensor.
  static WeightView expert(const WeightView& first, int64_t e);
  void attention_block(const Layer& L, int64_t l, int64_t n, const ForwardBatch& batch, KvCache& kv,
                       const AttentionBatch& ab);
  void ffn_block(const Layer& L, int64_t n);
  void moe_block(const Layer& L, int64_t n);
  LlamaModel(ModelConfig cfg, Backend& b) : cfg_(std::move(cfg)), backend_(&b) {}
  void ensure_capacity(int64_t n_tokens);
  void final_hidden(const ForwardBatch& batch, std::vector<float>& hidden);
  void free_buffers();

  ModelConfig cfg_;
  Backend* backend_;
  WeightView tok_embd_, output_;
  const float* output_norm_ = nullptr;
  const float* rope_freqs_ = nullptr;  // rope_freqs (llama 3) or phi3's long/short factors
  std::vector<Layer> layers_;
  std::vector<std::vector<float>> owned_;  // norms/biases stored in a non-f32 type, dequantized

  // Activation buffers, grown to the largest batch seen.
  int64_t capacity_ = 0;
  float *x_ = nullptr, *h_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *attn_ = nullptr,
        *o_ = nullptr, *gate_ = nullptr, *up_ = nullptr, *logits_ = nullptr, *router_ = nullptr,
        *moe_in_ = nullptr, *moe_out_ = nullptr;
  std::vector<float> router_host_;
};

}  // namespace th
