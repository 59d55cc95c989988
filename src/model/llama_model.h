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

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"
#include "kv/kv_cache.h"
#include "model/compute_type.h"
#include "model/model_config.h"
#include "model/weight_copy.h"
#include "parallel/communicator.h"

namespace th {

class GgufFile;

/// @brief A hash of a model file's metadata keys and tensors (names, shapes, types, the first
/// and last 64 bytes of each): how tensor-parallel ranks check that they opened the same file.
uint64_t model_fingerprint(const GgufFile& f);

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
  /// comm (tensor parallelism, more than one rank): keeps only this rank's shard (shard()),
  /// before the backend prepares (repacks) the weights, so a rank repacks only its share.
  static Result<std::unique_ptr<LlamaModel>> load(const GgufFile& f, Backend& backend, int64_t n_ctx = 0,
                                                  Communicator* comm = nullptr);
  ~LlamaModel();

  const ModelConfig& config() const { return cfg_; }

  /// @brief Runs the batch; logits of the tokens with want_logits, in batch order,
  /// n_vocab floats each, go to *logits. Every position a token attends to must
  /// already be in the cache or earlier in this batch, and every slot reserved.
  /// Every matrix product uses `type`'s copy of the weights (loaded: has_compute_type); the
  /// embedding is always the file's (a lookup, exact in every type).
  /// With `hidden`, the final hidden states (after the output norm: what the output matrix
  /// reads) of the tokens with want_hidden go there, in batch order, n_embd floats each.
  Status forward(const ForwardBatch& batch, KvCache& kv, std::vector<float>* logits,
                 ComputeType type = ComputeType::Native, std::vector<float>* hidden = nullptr);

  // Compute types (weight_sets.cpp). The file's own weights are `native`; each added type is
  // a copy of every matrix converted once to its format, or the file's own when every matrix
  // already is in it (an f32 file's fp32).
  /// Converts the matrices into t's format (Fp32, Fp16, Bf16, Fp8; fp8 rows that are not whole
  /// blocks of 32 go to bf16, see weight_note); a no-op when loaded. An
  /// error names the tensor and value the format cannot hold (f16 past 65504, non-finite).
  Status add_compute_type(ComputeType t, int threads = 0);
  bool has_compute_type(ComputeType t) const { return weight_set(t) >= 0; }
  /// The loaded types, native first, then in the order added.
  std::vector<ComputeType> compute_types() const;
  /// Which weight set t computes with (0: the file's), or -1 when t is not loaded.
  int weight_set(ComputeType t) const;
  /// Bytes of the matrices t computes with: the file's for native and for types it already is.
  size_t weight_bytes(ComputeType t) const;
  /// What t's copy holds in another format (fp8: matrices whose rows are not whole blocks
  /// stay bf16), or "".
  std::string weight_note(ComputeType t) const;
  /// Why add_compute_type(t) failed (the tensor and value), or "" when it never did.
  std::string unavailable_reason(ComputeType t) const;

  // Tensor parallelism by attention heads (tensor_parallel.cpp).
  /// Ranks other than 0: run the forward passes rank 0 broadcasts until it sends stop.
  Status follow();
  /// Rank 0: ends the other ranks' follow().
  Status stop_followers();
  /// Rank 0, while no forward pass runs: every rank's {weight-matrix bytes, resident bytes
  /// (VmRSS)} now, in rank order (a plan the followers answer).
  Result<std::vector<std::pair<uint64_t, uint64_t>>> rank_memory();

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
  // A layer's fused products, each named once: run in its block, announced to
  // Backend::prefetch_products before it (the block or the layer before).
  std::array<MatmulJob, 3> qkv_jobs(const Layer& L) const { return {{{&L.wq, q_}, {&L.wk, k_}, {&L.wv, v_}}}; }
  std::array<MatmulJob, 2> gate_up_jobs(const Layer& L) const { return {{{&L.w_gate, gate_}, {&L.w_up, up_}}}; }
  void attention_block(const Layer& L, int64_t l, int64_t n, const ForwardBatch& batch, KvCache& kv,
                       const AttentionBatch& ab);
  void ffn_block(const Layer& L, int64_t n);
  void moe_block(const Layer& L, int64_t n);
  // A compute type's converted matrices (the norms, biases and embedding stay the file's).
  struct WeightSet {
    ComputeType type = ComputeType::Native;
    std::vector<Layer> layers;
    WeightView output;
    std::vector<WeightStorage> storage;
    size_t bytes = 0;
    std::string note;  // matrices held in another format, and why
  };
  LlamaModel(ModelConfig cfg, Backend& b) : cfg_(std::move(cfg)), backend_(&b) {}
  void ensure_capacity(int64_t n_tokens);
  void final_hidden(const ForwardBatch& batch, std::vector<float>& hidden);
  void free_buffers();
  // load(..., comm): keeps this rank's share of every matrix (comm.size() ranks; whole KV
  // heads, 1/N of the FFN), so config() afterwards says this rank's heads and FFN width (what
  // its KV cache holds), and forward() all-reduces through comm. Refused with the reason when
  // the shape does not divide (KV heads, FFN width, whole quant blocks).
  Status shard(Communicator& comm);
  WeightView column_slice(const WeightView& w, int64_t first, int64_t n);
  void reduce(float* y, int64_t n);  // sum over ranks; a failure stays in comm_status_
  Status send_plan(const ForwardBatch& batch, ComputeType type, const KvCache& kv);

  ModelConfig cfg_;
  Backend* backend_;
  WeightView tok_embd_, output_;
  const float* output_norm_ = nullptr;
  const float* rope_freqs_ = nullptr;  // rope_freqs (llama 3) or phi3's long/short factors
  std::vector<Layer> layers_;
  std::vector<std::vector<float>> owned_;  // norms/biases stored in a non-f32 type, dequantized
  std::vector<std::pair<ComputeType, int>> type_sets_;  // loaded type -> 0 (the file's) or 1 + copies_ index
  std::vector<WeightSet> copies_;
  std::vector<std::pair<ComputeType, std::string>> unavailable_;  // failed add_compute_type: why
  Communicator* comm_ = nullptr;                  // set by shard: null or size 1 is one process
  Status comm_status_;                            // the first failed all-reduce
  std::vector<std::vector<uint8_t>> shard_storage_;  // column slices (attn_output, ffn_down)
  std::vector<float> reduce_host_;

  // Activation buffers, grown to the largest batch seen.
  int64_t capacity_ = 0;
  float *x_ = nullptr, *h_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *attn_ = nullptr,
        *o_ = nullptr, *gate_ = nullptr, *up_ = nullptr, *logits_ = nullptr, *router_ = nullptr,
        *moe_in_ = nullptr, *moe_out_ = nullptr;
  std::vector<float> router_host_;
};

}  // namespace th
