// A Hugging Face model's config.json and tensor names, turned into what the GGUF of
// the same model holds (llama.cpp's convert_hf_to_gguf.py's keys and names), so the
// model loads through the one GGUF path. One table per architecture maps the names.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"
#include "format/gguf.h"

namespace th {

/// The size a tensor dimension must have, named by what fixes it.
enum class HfDim {
  None, Embd, Ff, QDim, KvDim, HeadDim, Vocab,
  Qkv,      // q_dim + 2 kv_dim (phi3's fused qkv_proj)
  Ff2,      // 2 n_ff (phi3's fused gate_up_proj)
  Experts,  // the router's outputs
  FfExp,    // one expert's FFN width
};

/// How an HF tensor becomes its GGUF one.
enum class HfOp {
  None,     // the same data (mapped, no copy)
  PlusOne,  // Gemma's RMSNorm scales by 1 + w; llama.cpp's converter stores w + 1 (f32, copied)
  Experts,  // "{E}" is the expert: the n_expert matrices stacked into one 3-D tensor
};

/// One row of an architecture's table: "{N}" stands for the layer number.
struct HfTensorRow {
  std::string_view hf;    // e.g. "model.layers.{N}.self_attn.q_proj.weight"
  std::string_view gguf;  // e.g. "blk.{N}.attn_q.weight"
  HfDim rows, cols;       // HF order: [rows, cols] ([rows] for a vector, cols None); one expert's
  bool optional = false;
  HfOp op = HfOp::None;
};

struct HfArch {
  std::string_view model_type;  // config.json's model_type
  std::string_view gguf_arch;   // general.architecture
  // HF keeps q/k rows in rotate-half order; llama.cpp's converter permutes them for
  // llama's adjacent-pair RoPE. Loading them unpermuted (no copy) means RoPE on halves.
  bool rope_neox_unpermuted = false;
  std::span<const HfTensorRow> tensors;
  std::string_view act = "silu";  // hidden_act (gemma: hidden_activation) it must have
  bool sliding_window = false;    // config.json's sliding_window applies to every layer (mistral)
};

/// @brief The table of config.json's model_type, or null.
const HfArch* find_hf_arch(std::string_view model_type);
/// @brief The table that writes a GGUF architecture as HF (mkmodel --format hf), or null:
/// llama with experts is mixtral, llama with a sliding window mistral.
const HfArch* find_hf_arch_for_gguf(std::string_view gguf_arch, bool experts = false, bool sliding_window = false);
/// @brief "llama, mistral, ..." for messages.
std::string hf_arch_names();
/// @brief The row's name for layer `layer` ("{N}" replaced).
std::string hf_layer_name(std::string_view pattern, int64_t layer);
/// @brief The row's name for expert `expert` of layer `layer` ("{N}" and "{E}" replaced).
std::string hf_expert_name(std::string_view pattern, int64_t layer, int64_t expert);

/// What config.json says, as GGUF metadata plus the sizes the tensor table checks.
struct HfConfig {
  const HfArch* arch = nullptr;
  std::vector<std::pair<std::string, GgufValue>> metadata;
  int64_t n_layer = 0, n_embd = 0, n_ff = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_vocab = 0;
  int64_t n_expert = 0, n_ff_exp = 0;
  // Tensors made from config.json (phi3's rope_scaling long_factor / short_factor), by GGUF name.
  std::vector<std::pair<std::string, std::vector<float>>> extra_tensors;
  bool tied = false;  // tie_word_embeddings: lm_head is the embedding
  int64_t bos = -1, eos = -1;  // bos_token_id / eos_token_id (-1: absent)
  // Before every tensor name of the table: "language_model." for a vision-language folder
  // (Gemma3ForConditionalGeneration), whose vision tower and projector are not loaded.
  std::string tensor_prefix;
  int64_t dim(HfDim d) const;
};

/// @brief Parses config.json's text; `name` (its path) prefixes every error. A Gemma 3
/// vision-language config (model_type "gemma3" with a text_config) is read as its text model.
Result<HfConfig> parse_hf_config(std::string_view text, const std::string& name);

/// @brief Gemma3TextConfig's defaults (transformers), which the hub's vision-language Gemma 3
/// configs leave out of their text_config (the 4B's lists six keys).
const nlohmann::json& gemma3_text_defaults();

}  // namespace th
