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

#include "base/status.h"
#include "format/gguf.h"

namespace th {

/// The size a tensor dimension must have, named by what fixes it.
enum class HfDim { None, Embd, Ff, QDim, KvDim, HeadDim, Vocab };

/// One row of an architecture's table: "{N}" stands for the layer number.
struct HfTensorRow {
  std::string_view hf;    // e.g. "model.layers.{N}.self_attn.q_proj.weight"
  std::string_view gguf;  // e.g. "blk.{N}.attn_q.weight"
  HfDim rows, cols;       // HF order: [rows, cols] ([rows] for a vector, cols None)
  bool optional = false;
};

struct HfArch {
  std::string_view model_type;  // config.json's model_type
  std::string_view gguf_arch;   // general.architecture
  // HF keeps q/k rows in rotate-half order; llama.cpp's converter permutes them for
  // llama's adjacent-pair RoPE. Loading them unpermuted (no copy) means RoPE on halves.
  bool rope_neox_unpermuted = false;
  std::span<const HfTensorRow> tensors;
};

/// @brief The table of config.json's model_type, or null.
const HfArch* find_hf_arch(std::string_view model_type);
/// @brief The table that writes a GGUF architecture as HF (mkmodel --format hf), or null.
const HfArch* find_hf_arch_for_gguf(std::string_view gguf_arch);
/// @brief "llama, mistral, ..." for messages.
std::string hf_arch_names();
/// @brief The row's name for layer `layer` ("{N}" replaced).
std::string hf_layer_name(std::string_view pattern, int64_t layer);

/// What config.json says, as GGUF metadata plus the sizes the tensor table checks.
struct HfConfig {
  const HfArch* arch = nullptr;
  std::vector<std::pair<std::string, GgufValue>> metadata;
  int64_t n_layer = 0, n_embd = 0, n_ff = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_vocab = 0;
  bool tied = false;  // tie_word_embeddings: lm_head is the embedding
  int64_t bos = -1, eos = -1;  // bos_token_id / eos_token_id (-1: absent)
  int64_t dim(HfDim d) const;
};

/// @brief Parses config.json's text; `name` (its path) prefixes every error.
Result<HfConfig> parse_hf_config(std::string_view text, const std::string& name);

}  // namespace th
