// write_hf_folder (hf_folder.h): a GGUF model as the Hugging Face folder it was converted from.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "format/hf_config.h"
#include "format/hf_folder.h"
#include "format/hf_tokenizer.h"
#include "format/safetensors.h"

namespace th {

namespace {

using json = nlohmann::json;

Status write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.flush()) return Status::errorf(path, ": cannot write");
  return ok_status();
}

Result<int64_t> meta_int(const GgufFile& g, const std::string& key) {
  TH_ASSIGN_OR_RETURN(uint64_t v, g.get_uint(key));
  return static_cast<int64_t>(v);
}

// llama.cpp's converter permutes q/k rows within each head: GGUF row 2i + j is HF row
// j * head_dim / 2 + i (j in {0, 1}). This undoes it.
std::vector<uint8_t> unpermute_rows(const GgufTensor& t, int64_t n_head) {
  const int64_t rows = t.dims.size() == 1 ? t.dims[0] : t.n_rows(), head_dim = rows / n_head;
  const size_t rb = t.nbytes / static_cast<size_t>(rows);
  std::vector<uint8_t> out(t.nbytes);
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < head_dim / 2; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::memcpy(out.data() + static_cast<size_t>(h * head_dim + j * head_dim / 2 + i) * rb,
                    t.data + static_cast<size_t>(h * head_dim + 2 * i + j) * rb, rb);
  return out;
}

Result<json> config_json(const GgufFile& g, const HfArch& A, const HfWriteOptions& o) {
  const std::string a = std::string(A.gguf_arch) + ".";
  json c;
  c["model_type"] = A.model_type;
  c["architectures"] = json::array();
  c["hidden_act"] = "silu";
  for (auto [hf, key] : {std::pair{"num_hidden_layers", "block_count"}, std::pair{"hidden_size", "embedding_length"},
                         std::pair{"intermediate_size", "feed_forward_length"},
                         std::pair{"num_attention_heads", "attention.head_count"},
                         std::pair{"num_key_value_heads", "attention.head_count_kv"},
                         std::pair{"max_position_embeddings", "context_length"}}) {
    TH_ASSIGN_OR_RETURN(c[hf], meta_int(g, a + key));
  }
  if (g.has(a + "attention.key_length")) {
    TH_ASSIGN_OR_RETURN(c["head_dim"], meta_int(g, a + "attention.key_length"));
  }
  TH_ASSIGN_OR_RETURN(c["rope_theta"], g.get_float(a + "rope.freq_base"));
  TH_ASSIGN_OR_RETURN(c["rms_norm_eps"], g.get_float(a + "attention.layer_norm_rms_epsilon"));
  const GgufTensor* embd = g.tensor("token_embd.weight");
  if (!embd || embd->dims.size() != 2) return Status::errorf(g.name(), ": no token_embd.weight matrix");
  c["vocab_size"] = embd->dims[1];
  c["tie_word_embeddings"] = g.tensor("output.weight") == nullptr;
  c["rope_scaling"] = o.rope_scaling.empty() ? json() : json::parse(o.rope_scaling, nullptr, false);
  if (c["rope_scaling"].is_discarded()) return Status::errorf("rope_scaling '", o.rope_scaling, "' is not JSON");
  return c;
}

Status write_tokenizer(const GgufFile& g, const std::string& dir) {
  TH_ASSIGN_OR_RETURN(std::string model, g.get_string("tokenizer.ggml.model"));
  std::string pre = "default";
  if (g.has("tokenizer.ggml.pre")) {
    TH_ASSIGN_OR_RETURN(pre, g.get_string("tokenizer.ggml.pre"));
  }
  const char* regex = hf_pre_tokenizer_regex(pre);
  if (model != "gpt2" || !regex)
    return Status::errorf(g.name(), ": vocabulary '", model, "' with pre-tokenizer '", pre,
                          "' cannot be written as tokenizer.json (byte-level BPE: gpt-2, llama-bpe, qwen2)");
  TH_ASSIGN_OR_RETURN(const GgufArray* tokens, g.get_array("tokenizer.ggml.tokens"));
  TH_ASSIGN_OR_RETURN(const GgufArray* types, g.get_array("tokenizer.ggml.token_type"));
  TH_ASSIGN_OR_RETURN(const GgufArray* merges, g.get_array("tokenizer.ggml.merges"));
  json vocab = json::object(), added = json::array();
  for (size_t i = 0; i < tokens->strings.size(); ++i) {
    const int64_t type = i < types->ints.size() ? types->ints[i] : 1;
    if (type == 3 || type == 4) {
      added.push_back({{"id", i}, {"content", tokens->strings[i]}, {"special", type == 3}, {"normalized", false},
                       {"lstrip", false}, {"rstrip", false}, {"single_word", false}});
    } else if (type != 5) {
      vocab[tokens->strings[i]] = i;
    }
  }
  json pt = *regex ? json{{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
                            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}
                   : json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  json t = {{"version", "1.0"}, {"added_tokens", added}, {"normalizer", nullptr}, {"pre_tokenizer", pt},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges->strings}}}};
  TH_RETURN_IF_ERROR(write_text(dir + "/tokenizer.json", t.dump()));
  json cfg = json::object();
  for (auto [key, gguf_key] : {std::pair{"bos_token", "tokenizer.ggml.bos_token_id"},
                               std::pair{"eos_token", "tokenizer.ggml.eos_token_id"}}) {
    if (!g.has(gguf_key)) continue;
    TH_ASSIGN_OR_RETURN(uint64_t id, g.get_uint(gguf_key));
    if (id < tokens->strings.size()) cfg[key] = tokens->strings[id];
  }
  if (g.has("tokenizer.chat_template")) {
    TH_ASSIGN_OR_RETURN(cfg["chat_template"], g.get_string("tokenizer.chat_template"));
  }
  return write_text(dir + "/tokenizer_config.json", cfg.dump());
}

}  // namespace

Status write_hf_folder(const GgufFile& g, const std::string& dir, const HfWriteOptions& o) {
  TH_ASSIGN_OR_RETURN(std::string arch, g.get_string("general.architecture"));
  const HfArch* A = find_hf_arch_for_gguf(arch);
  if (!A) return Status::errorf(g.name(), ": architecture '", arch, "' has no Hugging Face table (", hf_arch_names(), ")");
  TH_ASSIGN_OR_RETURN(json config, config_json(g, *A, o));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::errorf(dir, ": cannot create: ", ec.message());
  TH_RETURN_IF_ERROR(write_text(dir + "/config.json", config.dump(1)));
  TH_RETURN_IF_ERROR(write_tokenizer(g, dir));

  const int64_t n_layer = config["num_hidden_layers"], n_head = config["num_attention_heads"],
                n_head_kv = config["num_key_value_heads"];
  std::vector<SafetensorsTensor> out;
  std::vector<std::vector<uint8_t>> owned;
  owned.reserve(static_cast<size_t>(4 * n_layer));
  for (const HfTensorRow& row : A->tensors) {
    const bool per_layer = row.hf.find("{N}") != std::string_view::npos;
    for (int64_t l = 0; l < (per_layer ? n_layer : 1); ++l) {
      const GgufTensor* t = g.tensor(hf_layer_name(row.gguf, l));
      if (!t) {
        if (row.optional) continue;
        return Status::errorf(g.name(), ": missing tensor '", hf_layer_name(row.gguf, l), "'");
      }
      SafetensorsTensor s;
      s.name = hf_layer_name(row.hf, l);
      s.dtype = t->type == DType::F32 ? "F32" : t->type == DType::F16 ? "F16" : t->type == DType::BF16 ? "BF16" : "";
      if (s.dtype.empty())
        return Status::errorf(g.name(), ": tensor '", t->name, "' is ", dtype_name(t->type), " (HF folders: f32, f16, bf16)");
      s.shape.assign(t->dims.rbegin(), t->dims.rend());
      s.data = t->data;
      s.nbytes = t->nbytes;
      const bool q = row.gguf.find("attn_q.") != std::string_view::npos, k = row.gguf.find("attn_k.") != std::string_view::npos;
      if (A->rope_neox_unpermuted && (q || k)) {
        owned.push_back(unpermute_rows(*t, q ? n_head : n_head_kv));
        s.data = owned.back().data();
      }
      out.push_back(std::move(s));
    }
  }
  if (o.shards <= 1) return write_safetensors(dir + "/model.safetensors", out);
  json index = {{"metadata", json::object()}, {"weight_map", json::object()}};
  const size_t per = (out.size() + static_cast<size_t>(o.shards) - 1) / static_cast<size_t>(o.shards);
  for (int s = 0; s < o.shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, o.shards);
    const size_t lo = std::min(out.size(), per * static_cast<size_t>(s)), hi = std::min(out.size(), lo + per);
    std::vector<SafetensorsTensor> part(out.begin() + static_cast<std::ptrdiff_t>(lo), out.begin() + static_cast<std::ptrdiff_t>(hi));
    for (const auto& t : part) index["weight_map"][t.name] = name;
    TH_RETURN_IF_ERROR(write_safetensors(dir + "/" + name, part));
  }
  return write_text(dir + "/model.safetensors.index.json", index.dump(1));
}

}  // namespace th
