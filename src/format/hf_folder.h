// A Hugging Face model folder (config.json, model.safetensors or shards with
// model.safetensors.index.json, tokenizer.json, tokenizer_config.json) presented as the
// GGUF file llama.cpp's converter would write for it: metadata from the JSON files
// (hf_config.h, hf_tokenizer.h) and tensors renamed by the architecture's table, their
// data in the mapped safetensors files (no copy). The model and tokenizer load from it
// as from any GgufFile.
#pragma once

#include <string>

#include "base/status.h"
#include "format/gguf.h"

namespace th {

/// @brief True when `path` is a folder (then it is opened with open_hf_folder).
bool is_hf_folder(const std::string& path);

/// @brief Opens the folder; an error names the file and the thing (key, tensor, dtype, shape).
Result<GgufFile> open_hf_folder(const std::string& dir);

struct HfWriteOptions {
  int shards = 1;             // 1: model.safetensors; more: model-0000i-of-0000n.safetensors + the index
  std::string rope_scaling;   // config.json's rope_scaling object as JSON text ("": none)
  // gemma3 only: as a vision-language folder (Gemma3ForConditionalGeneration): config.json's
  // text_config without the keys equal to Gemma3TextConfig's defaults, tensors under
  // "language_model.", and a small vision tower and projector beside them.
  bool vision_language = false;
};

/// @brief Writes a GGUF model (every architecture of hf_config.h's tables; f32/f16/bf16; a
/// byte-level BPE vocab) as a Hugging Face folder: the inverse of open_hf_folder (llama's q/k
/// rows un-permuted back to HF's order, gemma's norms less 1, experts one tensor each).
/// mkmodel --format hf.
Status write_hf_folder(const GgufFile& g, const std::string& dir, const HfWriteOptions& o);

}  // namespace th
