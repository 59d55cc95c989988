// The HF -> GGUF tensor-name tables, one per architecture (hf_config.h), with the names as
// llama.cpp's gguf-py tensor_mapping.py maps them and its convert_hf_to_gguf.py converts
// them (upstream 82bb48500).
#include "format/hf_config.h"

namespace th {

namespace {

using D = HfDim;
using Op = HfOp;

#define TH_HF_ATTN_ROWS                                                                                      \
  {"model.embed_tokens.weight", "token_embd.weight", D::Vocab, D::Embd},                                    \
      {"model.norm.weight", "output_norm.weight", D::Embd, D::None},                                        \
      {"lm_head.weight", "output.weight", D::Vocab, D::Embd, true},                                         \
      {"model.layers.{N}.input_layernorm.weight", "blk.{N}.attn_norm.weight", D::Embd, D::None},            \
      {"model.layers.{N}.self_attn.q_proj.weight", "blk.{N}.attn_q.weight", D::QDim, D::Embd},              \
      {"model.layers.{N}.self_attn.k_proj.weight", "blk.{N}.attn_k.weight", D::KvDim, D::Embd},             \
      {"model.layers.{N}.self_attn.v_proj.weight", "blk.{N}.attn_v.weight", D::KvDim, D::Embd},             \
      {"model.layers.{N}.self_attn.o_proj.weight", "blk.{N}.attn_output.weight", D::Embd, D::QDim},         \
      {"model.layers.{N}.post_attention_layernorm.weight", "blk.{N}.ffn_norm.weight", D::Embd, D::None}

#define TH_HF_MLP_ROWS                                                                                       \
  {"model.layers.{N}.mlp.gate_proj.weight", "blk.{N}.ffn_gate.weight", D::Ff, D::Embd},                     \
      {"model.layers.{N}.mlp.up_proj.weight", "blk.{N}.ffn_up.weight", D::Ff, D::Embd},                     \
      {"model.layers.{N}.mlp.down_proj.weight", "blk.{N}.ffn_down.weight", D::Embd, D::Ff}

#define TH_HF_QK_NORM_ROWS(op)                                                                               \
  {"model.layers.{N}.self_attn.q_norm.weight", "blk.{N}.attn_q_norm.weight", D::HeadDim, D::None, false, op}, \
      {"model.layers.{N}.self_attn.k_norm.weight", "blk.{N}.attn_k_norm.weight", D::HeadDim, D::None, false, op}

// Llama 1/2/3 and Mistral.
constexpr HfTensorRow kLlama[] = {
    TH_HF_ATTN_ROWS,
    TH_HF_MLP_ROWS,
    // attention_bias: true (some Llama fine-tunes)
    {"model.layers.{N}.self_attn.q_proj.bias", "blk.{N}.attn_q.bias", D::QDim, D::None, true},
    {"model.layers.{N}.self_attn.k_proj.bias", "blk.{N}.attn_k.bias", D::KvDim, D::None, true},
    {"model.layers.{N}.self_attn.v_proj.bias", "blk.{N}.attn_v.bias", D::KvDim, D::None, true},
};
// Mixtral: w1 is the gate, w3 the up, w2 the down projection.
constexpr HfTensorRow kMixtral[] = {
    TH_HF_ATTN_ROWS,
    {"model.layers.{N}.block_sparse_moe.gate.weight", "blk.{N}.ffn_gate_inp.weight", D::Experts, D::Embd},
    {"model.layers.{N}.block_sparse_moe.experts.{E}.w1.weight", "blk.{N}.ffn_gate_exps.weight", D::FfExp, D::Embd,
     false, Op::Experts},
    {"model.layers.{N}.block_sparse_moe.experts.{E}.w3.weight", "blk.{N}.ffn_up_exps.weight", D::FfExp, D::Embd,
     false, Op::Experts},
    {"model.layers.{N}.block_sparse_moe.experts.{E}.w2.weight", "blk.{N}.ffn_down_exps.weight", D::Embd, D::FfExp,
     false, Op::Experts},
};
constexpr HfTensorRow kQwen2[] = {
    TH_HF_ATTN_ROWS,
    TH_HF_MLP_ROWS,
    {"model.layers.{N}.self_attn.q_proj.bias", "blk.{N}.attn_q.bias", D::QDim, D::None},
    {"model.layers.{N}.self_attn.k_proj.bias", "blk.{N}.attn_k.bias", D::KvDim, D::None},
    {"model.layers.{N}.self_attn.v_proj.bias", "blk.{N}.attn_v.bias", D::KvDim, D::None},
};
constexpr HfTensorRow kQwen3[] = {TH_HF_ATTN_ROWS, TH_HF_MLP_ROWS, TH_HF_QK_NORM_ROWS(Op::None)};
constexpr HfTensorRow kQwen3Moe[] = {
    TH_HF_ATTN_ROWS,
    TH_HF_QK_NORM_ROWS(Op::None),
    {"model.layers.{N}.mlp.gate.weight", "blk.{N}.ffn_gate_inp.weight", D::Experts, D::Embd},
    {"model.layers.{N}.mlp.experts.{E}.gate_proj.weight", "blk.{N}.ffn_gate_exps.weight", D::FfExp, D::Embd, false,
     Op::Experts},
    {"model.layers.{N}.mlp.experts.{E}.up_proj.weight", "blk.{N}.ffn_up_exps.weight", D::FfExp, D::Embd, false,
     Op::Experts},
    {"model.layers.{N}.mlp.experts.{E}.down_proj.weight", "blk.{N}.ffn_down_exps.weight", D::Embd, D::FfExp, false,
     Op::Experts},
};
// Gemma 2/3: four norms per layer, every one stored as w (scaled by 1 + w).
#define TH_HF_GEMMA_ROWS                                                                                     \
  {"model.embed_tokens.weight", "token_embd.weight", D::Vocab, D::Embd},                                    \
      {"model.norm.weight", "output_norm.weight", D::Embd, D::None, false, Op::PlusOne},                    \
      {"lm_head.weight", "output.weight", D::Vocab, D::Embd, true},                                         \
      {"model.layers.{N}.input_layernorm.weight", "blk.{N}.attn_norm.weight", D::Embd, D::None, false,      \
       Op::PlusOne},                                                                                        \
      {"model.layers.{N}.self_attn.q_proj.weight", "blk.{N}.attn_q.weight", D::QDim, D::Embd},              \
      {"model.layers.{N}.self_attn.k_proj.weight", "blk.{N}.attn_k.weight", D::KvDim, D::Embd},             \
      {"model.layers.{N}.self_attn.v_proj.weight", "blk.{N}.attn_v.weight", D::KvDim, D::Embd},             \
      {"model.layers.{N}.self_attn.o_proj.weight", "blk.{N}.attn_output.weight", D::Embd, D::QDim},         \
      {"model.layers.{N}.post_attention_layernorm.weight", "blk.{N}.post_attention_norm.weight", D::Embd,   \
       D::None, false, Op::PlusOne},                                                                        \
      {"model.layers.{N}.pre_feedforward_layernorm.weight", "blk.{N}.ffn_norm.weight", D::Embd, D::None,    \
       false, Op::PlusOne},                                                                                 \
      {"model.layers.{N}.post_feedforward_layernorm.weight", "blk.{N}.post_ffw_norm.weight", D::Embd,       \
       D::None, false, Op::PlusOne},                                                                        \
      TH_HF_MLP_ROWS
constexpr HfTensorRow kGemma2[] = {TH_HF_GEMMA_ROWS};
constexpr HfTensorRow kGemma3[] = {TH_HF_GEMMA_ROWS, TH_HF_QK_NORM_ROWS(Op::PlusOne)};
// Phi-3/Phi-4: q, k and v in one matrix, gate then up in another.
constexpr HfTensorRow kPhi3[] = {
    {"model.embed_tokens.weight", "token_embd.weight", D::Vocab, D::Embd},
    {"model.norm.weight", "output_norm.weight", D::Embd, D::None},
    {"lm_head.weight", "output.weight", D::Vocab, D::Embd, true},
    {"model.layers.{N}.input_layernorm.weight", "blk.{N}.attn_norm.weight", D::Embd, D::None},
    {"model.layers.{N}.self_attn.qkv_proj.weight", "blk.{N}.attn_qkv.weight", D::Qkv, D::Embd},
    {"model.layers.{N}.self_attn.o_proj.weight", "blk.{N}.attn_output.weight", D::Embd, D::QDim},
    {"model.layers.{N}.post_attention_layernorm.weight", "blk.{N}.ffn_norm.weight", D::Embd, D::None},
    {"model.layers.{N}.mlp.gate_up_proj.weight", "blk.{N}.ffn_up.weight", D::Ff2, D::Embd},
    {"model.layers.{N}.mlp.down_proj.weight", "blk.{N}.ffn_down.weight", D::Embd, D::Ff},
};
#undef TH_HF_ATTN_ROWS
#undef TH_HF_MLP_ROWS
#undef TH_HF_QK_NORM_ROWS
#undef TH_HF_GEMMA_ROWS

// The first row of a GGUF architecture is the one write_hf_folder uses.
constexpr HfArch kArchs[] = {
    {"llama", "llama", true, kLlama},
    {"mistral", "llama", true, kLlama, "silu", true},
    {"mixtral", "llama", true, kMixtral, "silu", true},
    {"qwen2", "qwen2", false, kQwen2},
    {"qwen3", "qwen3", false, kQwen3},
    {"qwen3_moe", "qwen3moe", false, kQwen3Moe},
    {"gemma2", "gemma2", false, kGemma2, "gelu_pytorch_tanh"},
    {"gemma3_text", "gemma3", false, kGemma3, "gelu_pytorch_tanh"},
    {"phi3", "phi3", false, kPhi3},
};

}  // namespace

const HfArch* find_hf_arch(std::string_view model_type) {
  for (const HfArch& a : kArchs)
    if (a.model_type == model_type) return &a;
  return nullptr;
}

const HfArch* find_hf_arch_for_gguf(std::string_view gguf_arch, bool experts, bool sliding_window) {
  if (gguf_arch == "llama" && (experts || sliding_window)) return find_hf_arch(experts ? "mixtral" : "mistral");
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

std::string hf_expert_name(std::string_view pattern, int64_t layer, int64_t expert) {
  std::string s = hf_layer_name(pattern, layer);
  if (size_t at = s.find("{E}"); at != std::string::npos) s.replace(at, 3, std::to_string(expert));
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
    case HfDim::Qkv: return (n_head + 2 * n_head_kv) * head_dim;
    case HfDim::Ff2: return 2 * n_ff;
    case HfDim::Experts: return n_expert;
    case HfDim::FfExp: return n_ff_exp;
    case HfDim::None: break;
  }
  return 0;
}

}  // namespace th
