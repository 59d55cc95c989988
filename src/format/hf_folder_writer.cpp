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

Result<double> meta_float(const GgufFile& g, const std::string& key, double def) {
  if (!g.has(key)) return def;
  return g.get_float(key);
}

// Gemma's keys: the window, soft-caps, query scale (model_config.cpp's rule: head_dim but for
// the 27B shapes), gemma3's layer pattern and local RoPE base, each with the GGUF's default.
Status gemma_config(const GgufFile& g, const std::string& a, bool gemma2, json& c) {
  c["hidden_activation"] = "gelu_pytorch_tanh";
  TH_ASSIGN_OR_RETURN(c["sliding_window"], meta_int(g, a + "attention.sliding_window"));
  if (gemma2) {
    TH_ASSIGN_OR_RETURN(c["attn_logit_softcapping"], meta_float(g, a + "attn_logit_softcapping", 50.0));
    TH_ASSIGN_OR_RETURN(c["final_logit_softcapping"], meta_float(g, a + "final_logit_softcapping", 30.0));
  } else if (g.has(a + "final_logit_softcapping")) {
    TH_ASSIGN_OR_RETURN(c["final_logit_softcapping"], g.get_float(a + "final_logit_softcapping"));
  }
  const int64_t n_layer = c["num_hidden_layers"], n_embd = c["hidden_size"], n_head = c["num_attention_heads"];
  const int64_t head_dim = c.contains("head_dim") ? c["head_dim"].get<int64_t>() : n_embd / n_head;
  c["query_pre_attn_scalar"] = n_layer == (gemma2 ? 46 : 62) ? n_embd / n_head : head_dim;
  if (gemma2) return ok_status();
  TH_ASSIGN_OR_RETURN(c["rope_local_base_freq"], meta_float(g, a + "rope.freq_base_swa", 10000.0));
  int64_t period = 6;
  if (g.has(a + "attention.sliding_window_pattern")) {
    TH_ASSIGN_OR_RETURN(period, meta_int(g, a + "attention.sliding_window_pattern"));
  }
  c["layer_types"] = json::array();
  for (int64_t l = 0; l < n_layer; ++l)
    c["layer_types"].push_back(period > 0 && l % period == period - 1 ? "full_attention" : "sliding_attention");
  return ok_status();
}

// Phi-3's LongRoPE factors (rope_factors_long/short.weight) back into rope_scaling.
Status phi3_config(const GgufFile& g, const std::string& a, json& c) {
  TH_ASSIGN_OR_RETURN(c["original_max_position_embeddings"], meta_int(g, a + "rope.scaling.original_context_length"));
  TH_ASSIGN_OR_RETURN(int64_t rope_dim, meta_int(g, a + "rope.dimension_count"));
  const int64_t n_embd = c["hidden_size"], n_head = c["num_attention_heads"];
  if (rope_dim != n_embd / n_head)  // Phi-4-mini rotates 3/4 of each head
    c["partial_rotary_factor"] = static_cast<double>(rope_dim * n_head) / static_cast<double>(n_embd);
  const GgufTensor* lf = g.tensor("rope_factors_long.weight");
  const GgufTensor* sf = g.tensor("rope_factors_short.weight");
  if (!lf || !sf) return ok_status();
  if (lf->type != DType::F32 || sf->type != DType::F32)
    return Status::errorf(g.name(), ": rope_factors_long/short.weight are not f32");
  auto list = [](const GgufTensor* t) {
    const float* f = reinterpret_cast<const float*>(t->data);
    return std::vector<double>(f, f + t->nbytes / sizeof(float));
  };
  c["rope_scaling"] = {{"type", "longrope"}, {"long_factor", list(lf)}, {"short_factor", list(sf)}};
  return ok_status();
}

Result<json> config_json(const GgufFile& g, const HfArch& A, const HfWriteOptions& o) {
  const std::string a = std::string(A.gguf_arch) + ".";
  json c;
  c["model_type"] = A.model_type;
  c["architectures"] = json::array();
  c["hidden_act"] = A.act;
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
  if (o.rope_scaling.empty() && g.has(a + "rope.scaling.type")) {
    TH_ASSIGN_OR_RETURN(std::string type, g.get_string(a + "rope.scaling.type"));
    if (type != "linear" && type != "yarn")
      return Status::errorf(g.name(), ": rope.scaling.type '", type, "' cannot be written (linear, yarn)");
    TH_ASSIGN_OR_RETURN(double factor, g.get_float(a + "rope.scaling.factor"));
    c["rope_scaling"] = {{"rope_type", type}, {"factor", factor}};
    if (type == "yarn") {
      TH_ASSIGN_OR_RETURN(c["rope_scaling"]["original_max_position_embeddings"],
                          meta_int(g, a + "rope.scaling.original_context_length"));
    }
  }
  if (A.sliding_window) {
    c["sliding_window"] = json();
    if (g.has(a + "attention.sliding_window")) {
      TH_ASSIGN_OR_RETURN(c["sliding_window"], meta_int(g, a + "attention.sliding_window"));
    }
  }
  if (A.gguf_arch == "gemma2" || A.gguf_arch == "gemma3") TH_RETURN_IF_ERROR(gemma_config(g, a, A.gguf_arch == "gemma2", c));
  if (A.gguf_arch == "phi3") TH_RETURN_IF_ERROR(phi3_config(g, a, c));
  if (A.model_type == "mixtral" || A.gguf_arch == "qwen3moe") {
    const bool qwen = A.gguf_arch == "qwen3moe";
    TH_ASSIGN_OR_RETURN(c[qwen ? "num_experts" : "num_local_experts"], meta_int(g, a + "expert_count"));
    TH_ASSIGN_OR_RETURN(c["num_experts_per_tok"], meta_int(g, a + "expert_used_count"));
    if (qwen) {
      TH_ASSIGN_OR_RETURN(c["moe_intermediate_size"], meta_int(g, a + "expert_feed_forward_length"));
      c["norm_topk_prob"] = true;
      c["decoder_sparse_step"] = 1;
      c["mlp_only_layers"] = json::array();
    }
  }
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

// The text model's config as a Gemma3ForConditionalGeneration's, as the hub's are written.
json vision_language_config(const json& text) {
  json tc = json::object();
  for (const auto& [k, v] : text.items())
    if (k != "architectures" && !(gemma3_text_defaults().contains(k) && gemma3_text_defaults()[k] == v)) tc[k] = v;
  tc["model_type"] = "gemma3_text";
  return {{"model_type", "gemma3"},
          {"architectures", {"Gemma3ForConditionalGeneration"}},
          {"mm_tokens_per_image", 256},
          {"text_config", tc},
          {"vision_config", {{"model_type", "siglip_vision_model"}, {"hidden_size", 8}, {"patch_size", 2}}}};
}

}  // namespace

Status write_hf_folder(const GgufFile& g, const std::string& dir, const HfWriteOptions& o) {
  TH_ASSIGN_OR_RETURN(std::string arch, g.get_string("general.architecture"));
  const std::string a = arch + ".";
  Result<uint64_t> n_expert = g.get_uint(a + "expert_count");
  const bool experts = n_expert.ok() && *n_expert > 0;
  const HfArch* A = find_hf_arch_for_gguf(arch, experts, g.has(a + "attention.sliding_window"));
  if (!A) return Status::errorf(g.name(), ": architecture '", arch, "' has no Hugging Face table (", hf_arch_names(), ")");
  TH_ASSIGN_OR_RETURN(json config, config_json(g, *A, o));
  if (o.vision_language && arch != "gemma3")
    return Status::errorf(g.name(), ": only gemma3 is written as a vision-language folder, not '", arch, "'");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::errorf(dir, ": cannot create: ", ec.message());
  TH_RETURN_IF_ERROR(write_text(dir + "/config.json", (o.vision_language ? vision_language_config(config) : config).dump(1)));
  TH_RETURN_IF_ERROR(write_tokenizer(g, dir));

  const int64_t n_layer = config["num_hidden_layers"], n_head = config["num_attention_heads"],
                n_head_kv = config["num_key_value_heads"];
  std::vector<SafetensorsTensor> out;
  std::vector<std::vector<uint8_t>> owned;  // moved on growth: each one's data stays put
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
      if (row.op == HfOp::PlusOne) {  // the inverse of the converter's w + 1
        if (t->type != DType::F32) return Status::errorf(g.name(), ": tensor '", t->name, "' is not f32");
        owned.emplace_back(t->nbytes);
        const float* src = reinterpret_cast<const float*>(t->data);
        float* dst = reinterpret_cast<float*>(owned.back().data());
        for (size_t i = 0; i < t->nbytes / sizeof(float); ++i) dst[i] = src[i] - 1.0f;
        s.data = owned.back().data();
      }
      if (row.op == HfOp::Experts) {  // [n_expert, rows, cols] -> one [rows, cols] per expert, back to back
        if (t->dims.size() != 3) return Status::errorf(g.name(), ": tensor '", t->name, "' is not 3-D");
        const size_t each = t->nbytes / static_cast<size_t>(t->dims[2]);
        s.shape = {t->dims[1], t->dims[0]};
        s.nbytes = each;
        for (int64_t e = 0; e < t->dims[2]; ++e) {
          s.name = hf_expert_name(row.hf, l, e);
          s.data = t->data + static_cast<size_t>(e) * each;
          out.push_back(s);
        }
        continue;
      }
      out.push_back(std::move(s));
    }
  }
  if (o.vision_language) {  // what the text model must not load or trip on
    for (SafetensorsTensor& t : out) t.name = "language_model." + t.name;
    owned.emplace_back(8 * 12 * sizeof(float), uint8_t{0x3c});
    for (const char* name : {"vision_tower.vision_model.embeddings.patch_embedding.weight",
                             "multi_modal_projector.mm_input_projection_weight"})
      out.push_back(SafetensorsTensor{.name = name, .dtype = "F32", .shape = {8, 12}, .data = owned.back().data(),
                                      .nbytes = owned.back().size()});
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
