#include "format/hf_tokenizer.h"

#include <cctype>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_map>

namespace th {

namespace {

using json = nlohmann::json;

// tokenizer.json's Split regexes, character for character, and the tokenizer.ggml.pre
// name llama.cpp's converter gives each (by the hash of its encodings of a test text).
struct PreRow {
  const char* pre;
  const char* regex;  // "": no Split, ByteLevel's own regex (use_regex: true)
};
constexpr PreRow kPre[] = {
    {"llama-bpe",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"qwen2",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"gpt-2", ""},
};

// Untrusted JSON is read only through these (nlohmann's value() throws on a wrong type, and
// operator[] on a const object asserts on a missing key).
const json& member(const json& o, const char* key) {
  static const json kNull;
  if (!o.is_object()) return kNull;
  auto it = o.find(key);
  return it == o.end() ? kNull : *it;
}
std::string str_member(const json& o, const char* key) {
  const json& v = member(o, key);
  return v.is_string() ? v.get<std::string>() : "";
}
bool bool_member(const json& o, const char* key, bool def) {
  const json& v = member(o, key);
  return v.is_boolean() ? v.get<bool>() : def;
}

// GGUF's token types (tokenizer/vocab.h's TokenType).
constexpr int64_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;

// The pre-tokenizer's name: a Split with a known regex then ByteLevel, or ByteLevel alone.
Result<std::string> pre_name(const json& pt, const std::string& name) {
  std::vector<const json*> steps;
  if (pt.is_object() && str_member(pt, "type") == "Sequence" && pt.contains("pretokenizers") &&
      pt["pretokenizers"].is_array()) {
    for (const json& s : pt["pretokenizers"]) steps.push_back(&s);
  } else if (pt.is_object()) {
    steps.push_back(&pt);
  }
  std::string regex;
  bool byte_level = false, own_regex = false;
  for (const json* s : steps) {
    if (!s->is_object()) return Status::errorf(name, ": a pre_tokenizer step is not an object");
    const std::string type = str_member(*s, "type");
    if (type == "ByteLevel") {
      byte_level = true;
      own_regex = bool_member(*s, "use_regex", true);
    } else if (type == "Split" && s->contains("pattern") && (*s)["pattern"].is_object() &&
               (*s)["pattern"].contains("Regex") && (*s)["pattern"]["Regex"].is_string() && regex.empty()) {
      regex = (*s)["pattern"]["Regex"].get<std::string>();
    } else {
      return Status::errorf(name, ": unsupported pre_tokenizer step '", type, "'");
    }
  }
  if (!byte_level)
    return Status::errorf(name, ": no ByteLevel pre_tokenizer (only byte-level BPE is supported, not SentencePiece-style)");
  if (own_regex && !regex.empty()) return Status::errorf(name, ": a Split regex and ByteLevel's own regex together");
  for (const PreRow& r : kPre)
    if (regex == r.regex) return std::string(r.pre);
  return Status::errorf(name, ": unsupported pre_tokenizer regex '", regex.substr(0, 60),
                        regex.size() > 60 ? "...'" : "'", " (supported: Llama 3's, Qwen 2's, GPT-2's)");
}

// A token named in tokenizer_config.json: a string or {"content": ...}; "" when absent or null.
std::string config_token(const json& cfg, const char* key) {
  if (!cfg.is_object() || !cfg.contains(key)) return "";
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

Result<std::string> chat_template(const json& cfg, const std::string& name) {
  if (!cfg.is_object() || !cfg.contains("chat_template") || cfg["chat_template"].is_null()) return std::string();
  const json& t = cfg["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array())  // named templates: the "default" one
    for (const json& e : t)
      if (e.is_object() && str_member(e, "name") == "default" && e.contains("template") && e["template"].is_string())
        return e["template"].get<std::string>();
  return Status::errorf(name, ": 'chat_template' is neither a string nor a list with a 'default' template");
}

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;
};

Result<Vocab> read_vocab(const json& j, int64_t n_vocab, const std::string& name) {
  const json& vocab = member(member(j, "model"), "vocab");
  if (!vocab.is_object()) return Status::errorf(name, ": model.vocab is not an object");
  constexpr int64_t kMaxVocab = 1 << 22;
  std::vector<std::pair<int64_t, std::pair<std::string, int64_t>>> entries;
  for (const auto& [tok, id] : vocab.items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= kMaxVocab)
      return Status::errorf(name, ": model.vocab id of '", tok.substr(0, 40), "' is not a token id");
    entries.push_back({id.get<int64_t>(), {tok, kNormal}});
  }
  if (j.contains("added_tokens") && !j["added_tokens"].is_array())
    return Status::errorf(name, ": added_tokens is not a list");
  for (const json& a : member(j, "added_tokens")) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_unsigned() || a["id"].get<uint64_t>() >= kMaxVocab ||
        !a.contains("content") || !a["content"].is_string())
      return Status::errorf(name, ": an added_tokens entry lacks an id or content");
    entries.push_back({a["id"].get<int64_t>(), {a["content"].get<std::string>(),
                                                bool_member(a, "special", false) ? kControl : kUserDefined}});
  }
  int64_t max_id = -1;
  for (const auto& e : entries) max_id = std::max(max_id, e.first);
  // Ids are dense in real files (Qwen 2.5 pads 151665 tokens to 151936); one far past the
  // count is a corrupt file, and refusing it bounds the padding allocated for it.
  if (max_id >= 2 * static_cast<int64_t>(entries.size()) + 1024)
    return Status::errorf(name, ": token id ", max_id, " is far past the ", entries.size(), " tokens given");
  const int64_t n = std::max(n_vocab, max_id + 1);
  Vocab v;
  v.tokens.resize(static_cast<size_t>(n));
  v.types.assign(static_cast<size_t>(n), kUnused);
  for (int64_t i = 0; i < n; ++i) v.tokens[static_cast<size_t>(i)] = "[PAD" + std::to_string(i) + "]";
  for (auto& [id, e] : entries) {  // added tokens come last and win over a vocab entry of the same id
    v.tokens[static_cast<size_t>(id)] = std::move(e.first);
    v.types[static_cast<size_t>(id)] = e.second;
  }
  return v;
}

Result<std::vector<std::string>> read_merges(const json& model, const std::string& name) {
  std::vector<std::string> out;
  if (!model.contains("merges") || !model["merges"].is_array()) return Status::errorf(name, ": model.merges is missing");
  for (const json& m : model["merges"]) {
    if (m.is_string()) {
      out.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    } else {
      return Status::errorf(name, ": a model.merges entry is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  return out;
}

constexpr const char* kMetaspace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// A SentencePiece-style tokenizer.json (byte_fallback BPE) says how spaces become U+2581 in its
// normalizer: the converter's Llama 2 / Mistral form is Prepend("▁") + Replace(" " -> "▁") with
// no pre_tokenizer, Gemma's Replace alone. Returns whether a "▁" is prepended (SPM's
// add_space_prefix: to each stretch of text between added tokens, as tokenhive's SPM does).
Result<bool> spm_space_prefix(const json& j, bool* nfc, const std::string& name) {
  if (!member(j, "pre_tokenizer").is_null())
    return Status::errorf(name, ": SentencePiece-style tokenizer with pre_tokenizer '",
                          str_member(j["pre_tokenizer"], "type"),
                          "' (supported: none, with the Prepend/Replace normalizer the converter writes)");
  const json& norm = member(j, "normalizer");
  std::vector<const json*> steps;
  if (str_member(norm, "type") == "Sequence" && member(norm, "normalizers").is_array()) {
    for (const json& s : norm["normalizers"]) steps.push_back(&s);
  } else if (!norm.is_null()) {
    steps.push_back(&norm);
  }
  bool prepend = false, replace = false;
  for (const json* s : steps) {
    const std::string type = str_member(*s, "type");
    if (type == "Prepend" && str_member(*s, "prepend") == kMetaspace && !prepend && !replace) {
      prepend = true;
    } else if (type == "Replace" && str_member(member(*s, "pattern"), "String") == " " &&
               str_member(*s, "content") == kMetaspace && !replace) {
      replace = true;
    } else if (type == "NFC" && !*nfc) {
      *nfc = true;
    } else {
      return Status::errorf(name, ": unsupported normalizer step '", type,
                            "' for a SentencePiece-style tokenizer (supported: Prepend \"\xE2\x96\x81\", Replace \" \" "
                            "with \"\xE2\x96\x81\", NFC)");
    }
  }
  if (!replace)
    return Status::errorf(name, ": SentencePiece-style tokenizer without the normalizer Replace \" \" with \"",
                          kMetaspace, "\"");
  return prepend;
}

// Byte tokens <0xNN> and the unknown token get their SPM types; every merge must make a token
// (as Hugging Face's loader requires: the SPM encoder cuts the text where no token can span)
// and name its parts without spaces (GGUF's "left right" form).
Status spm_types(const json& model, Vocab* v, const std::vector<std::string>& merges, const std::string& name) {
  std::unordered_map<std::string_view, int64_t> ids;
  for (size_t i = 0; i < v->tokens.size(); ++i) ids.emplace(v->tokens[i], static_cast<int64_t>(i));
  for (size_t i = 0; i < v->tokens.size(); ++i) {
    const std::string& t = v->tokens[i];
    if (v->types[i] == kNormal && t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
        std::isxdigit(static_cast<unsigned char>(t[3])) && std::isxdigit(static_cast<unsigned char>(t[4])))
      v->types[i] = kByte;
  }
  const std::string unk = str_member(model, "unk_token");
  if (auto it = ids.find(unk); !unk.empty() && it != ids.end()) v->types[static_cast<size_t>(it->second)] = kUnknown;
  std::string joined;
  for (size_t i = 0; i < merges.size(); ++i) {
    const size_t sp = merges[i].find(' ', 1);
    joined = merges[i].substr(0, sp) + merges[i].substr(sp + 1);
    if (merges[i].find(' ', sp + 1) != std::string::npos || !ids.count(joined))
      return Status::errorf(name, ": model.merges[", i, "] '", merges[i].substr(0, 40),
                            "' does not make a token (or a part holds a space)");
  }
  return ok_status();
}

GgufValue string_array(std::vector<std::string> v) {
  auto a = std::make_shared<GgufArray>();
  a->elem_type = GgufType::STRING;
  a->strings = std::move(v);
  return GgufValue{GgufType::ARRAY, a};
}

}  // namespace

const char* hf_pre_tokenizer_regex(std::string_view pre) {
  if (pre == "llama3" || pre == "llama-v3") pre = "llama-bpe";
  for (const PreRow& r : kPre)
    if (pre == r.pre) return r.regex;
  return nullptr;
}

Result<std::vector<std::pair<std::string, GgufValue>>> hf_tokenizer_metadata(const HfTokenizerInput& in) {
  const std::string& name = in.tokenizer_json_name;
  const json j = json::parse(in.tokenizer_json.begin(), in.tokenizer_json.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::errorf(name, ": not a JSON object");
  if (!j.contains("model") || !j["model"].is_object()) return Status::errorf(name, ": 'model' is missing");
  const std::string type = str_member(j["model"], "type");
  if (type != "BPE") return Status::errorf(name, ": tokenizer model '", type, "' is not supported (BPE: byte-level or byte_fallback)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!str_member(j["model"], key).empty()) return Status::errorf(name, ": model.", key, " is not supported");
  if (!member(j["model"], "dropout").is_null() && member(j["model"], "dropout") != json(0.0))
    return Status::errorf(name, ": model.dropout is not supported");
  // byte_fallback: SentencePiece-style (U+2581 for spaces, <0xNN> tokens), served by the SPM
  // encoder merging by these ranks; else byte-level BPE behind a known pre-tokenizer regex.
  const bool spm = bool_member(j["model"], "byte_fallback", false);
  bool nfc = false, space_prefix = false;
  std::string pre;
  if (spm) {
    if (bool_member(j["model"], "ignore_merges", false))
      return Status::errorf(name, ": ignore_merges with byte_fallback is not supported");
    TH_ASSIGN_OR_RETURN(space_prefix, spm_space_prefix(j, &nfc, name));
  } else {
    if (!member(j, "normalizer").is_null() && str_member(j["normalizer"], "type") != "NFC")
      return Status::errorf(name, ": unsupported normalizer '", str_member(j["normalizer"], "type"), "' (none or NFC)");
    nfc = str_member(member(j, "normalizer"), "type") == "NFC";
    TH_ASSIGN_OR_RETURN(pre, pre_name(member(j, "pre_tokenizer"), name));
  }
  TH_ASSIGN_OR_RETURN(Vocab v, read_vocab(j, in.n_vocab, name));
  TH_ASSIGN_OR_RETURN(std::vector<std::string> merges, read_merges(j["model"], name));
  if (spm) TH_RETURN_IF_ERROR(spm_types(j["model"], &v, merges, name));

  json cfg = json::object();
  if (!in.tokenizer_config.empty()) {
    cfg = json::parse(in.tokenizer_config.begin(), in.tokenizer_config.end(), nullptr, false);
    if (cfg.is_discarded() || !cfg.is_object()) return Status::errorf(in.tokenizer_config_name, ": not a JSON object");
  }
  std::vector<std::pair<std::string, GgufValue>> m;
  m.emplace_back("tokenizer.ggml.model", GgufValue{GgufType::STRING, std::string(spm ? "llama" : "gpt2")});
  if (spm) {
    m.emplace_back("tokenizer.ggml.add_space_prefix", GgufValue{GgufType::BOOL, space_prefix});
    m.emplace_back("tokenhive.tokenizer.spm_merges", GgufValue{GgufType::BOOL, true});
  } else {
    m.emplace_back("tokenizer.ggml.pre", GgufValue{GgufType::STRING, pre});
  }
  if (nfc) m.emplace_back("tokenhive.tokenizer.nfc", GgufValue{GgufType::BOOL, true});
  auto types = std::make_shared<GgufArray>();
  types->elem_type = GgufType::INT32;
  types->ints = v.types;
  auto find_id = [&](const std::string& text) -> int64_t {
    for (size_t i = 0; i < v.tokens.size(); ++i)
      if (v.tokens[i] == text) return static_cast<int64_t>(i);
    return -1;
  };
  // As the converter: the token tokenizer_config.json names, else config.json's id.
  for (auto [key, fallback, gguf_key] : {std::tuple{"bos_token", in.bos, "tokenizer.ggml.bos_token_id"},
                                         std::tuple{"eos_token", in.eos, "tokenizer.ggml.eos_token_id"}}) {
    const std::string text = config_token(cfg, key);
    int64_t id = text.empty() ? fallback : find_id(text);
    if (!text.empty() && id < 0)
      return Status::errorf(in.tokenizer_config_name, ": ", key, " '", text.substr(0, 40), "' is not a token");
    if (id >= 0) m.emplace_back(gguf_key, GgufValue{GgufType::UINT32, id});
  }
  if (const int64_t unk = spm ? find_id(str_member(j["model"], "unk_token")) : -1; unk >= 0)
    m.emplace_back("tokenizer.ggml.unknown_token_id", GgufValue{GgufType::UINT32, unk});
  if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean())
    m.emplace_back("tokenizer.ggml.add_bos_token", GgufValue{GgufType::BOOL, cfg["add_bos_token"].get<bool>()});
  TH_ASSIGN_OR_RETURN(std::string tmpl, chat_template(cfg, in.tokenizer_config_name));
  if (!tmpl.empty()) m.emplace_back("tokenizer.chat_template", GgufValue{GgufType::STRING, tmpl});
  m.emplace_back("tokenizer.ggml.tokens", string_array(std::move(v.tokens)));
  m.emplace_back("tokenizer.ggml.token_type", GgufValue{GgufType::ARRAY, types});
  m.emplace_back("tokenizer.ggml.merges", string_array(std::move(merges)));
  return m;
}

}  // namespace th
