// tokenizer.ggml.* -> VocabData, with llama.cpp's defaults (llama_vocab::impl::load).
#include "tokenizer/vocab.h"

#include "format/gguf.h"
#include "tokenizer/pretokenizer.h"

namespace th {

namespace {

Result<const GgufArray*> typed_array(const GgufFile& f, std::string_view key,
                                     std::initializer_list<GgufType> allowed) {
  TH_ASSIGN_OR_RETURN(const GgufArray* a, f.get_array(key));
  for (GgufType t : allowed)
    if (a->elem_type == t) return a;
  return Status::errorf(f.name(), ": metadata '", key, "' is an array of ",
                        gguf_type_name(a->elem_type), ", expected ",
                        gguf_type_name(*allowed.begin()));
}

}  // namespace

Result<VocabData> vocab_from_gguf(const GgufFile& f) {
  VocabData v;
  TH_ASSIGN_OR_RETURN(const std::string model, f.get_string("tokenizer.ggml.model"));
  std::string pre;
  if (f.has("tokenizer.ggml.pre")) {
    TH_ASSIGN_OR_RETURN(pre, f.get_string("tokenizer.ggml.pre"));
  }
  v.pre = pre.empty() ? "default" : pre;

  if (model == "llama") {
    v.model = TokenizerModel::Spm;
    v.bos = 1, v.eos = 2, v.unk = 0, v.pad = -1;
    v.add_bos = true, v.add_eos = false, v.add_space_prefix = true;
  } else if (model == "gpt2") {
    v.model = TokenizerModel::Bpe;
    v.bos = 11, v.eos = 11, v.unk = -1, v.pad = -1;
    v.add_bos = false, v.add_eos = false, v.add_space_prefix = false;
    if (const PreTokenizerTraits* t = find_pre_tokenizer_traits(v.pre)) {
      if (t->add_bos) v.add_bos = true;
      if (t->no_bos) v.bos = -1;
    }
    if (!f.has("tokenizer.ggml.merges"))
      return Status::errorf(f.name(), ": BPE vocabulary without tokenizer.ggml.merges");
    TH_ASSIGN_OR_RETURN(const GgufArray* merges,
                        typed_array(f, "tokenizer.ggml.merges", {GgufType::STRING}));
    v.merges = merges->strings;
  } else if (model == "bert") {
    v.model = TokenizerModel::Wpm;
    v.bos = 101, v.eos = -1, v.unk = 100, v.pad = 0;
    v.add_bos = true, v.add_eos = false, v.add_space_prefix = false;
  } else if (model == "no_vocab" || model == "none") {
    return Status::errorf(f.name(), ": the model has no vocabulary (tokenizer.ggml.model = '",
                          model, "')");
  } else {
    return Status::errorf(f.name(), ": unsupported tokenizer model '", model,
                          "' (tokenizer.ggml.model; supported: llama, gpt2)");
  }

  TH_ASSIGN_OR_RETURN(const GgufArray* tokens,
                      typed_array(f, "tokenizer.ggml.tokens", {GgufType::STRING}));
  v.tokens = tokens->strings;
  const size_t n = v.tokens.size();

  if (f.has("tokenizer.ggml.scores")) {
    TH_ASSIGN_OR_RETURN(const GgufArray* s, typed_array(f, "tokenizer.ggml.scores",
                                                        {GgufType::FLOAT32, GgufType::INT32}));
    if (s->size() != n)
      return Status::errorf(f.name(), ": tokenizer.ggml.scores has ", s->size(), " entries for ",
                            n, " tokens");
    v.scores.reserve(n);
    if (s->elem_type == GgufType::FLOAT32) {
      for (double x : s->floats) v.scores.push_back(static_cast<float>(x));
    } else {
      for (int64_t x : s->ints) v.scores.push_back(static_cast<float>(x));
    }
  }
  if (f.has("tokenizer.ggml.token_type")) {
    TH_ASSIGN_OR_RETURN(const GgufArray* t,
                        typed_array(f, "tokenizer.ggml.token_type", {GgufType::INT32}));
    if (t->size() != n)
      return Status::errorf(f.name(), ": tokenizer.ggml.token_type has ", t->size(),
                            " entries for ", n, " tokens");
    v.types.reserve(n);
    for (int64_t x : t->ints) v.types.push_back(static_cast<TokenType>(x));
  }

  // As llama.cpp: a default outside the vocab is no token, and an id in the
  // file outside the vocab (converters write 0xFFFFFFFF for "none") leaves
  // the default in place.
  const std::pair<const char*, int32_t*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &v.bos},
      {"tokenizer.ggml.eos_token_id", &v.eos},
      {"tokenizer.ggml.eot_token_id", &v.eot},
      {"tokenizer.ggml.unknown_token_id", &v.unk},
      {"tokenizer.ggml.padding_token_id", &v.pad},
  };
  for (const auto& [key, id] : ids) {
    if (*id >= 0 && static_cast<size_t>(*id) >= n) *id = -1;
    if (!f.has(key)) continue;
    TH_ASSIGN_OR_RETURN(const int64_t x, f.get_int(key));
    if (x >= 0 && static_cast<uint64_t>(x) < n) *id = static_cast<int32_t>(x);
  }

  if (f.has("tokenizer.ggml.add_bos_token")) {
    TH_ASSIGN_OR_RETURN(v.add_bos, f.get_bool("tokenizer.ggml.add_bos_token"));
  }
  if (f.has("tokenizer.ggml.add_eos_token")) {
    TH_ASSIGN_OR_RETURN(v.add_eos, f.get_bool("tokenizer.ggml.add_eos_token"));
  }
  if (f.has("tokenizer.ggml.add_space_prefix")) {
    TH_ASSIGN_OR_RETURN(v.add_space_prefix, f.get_bool("tokenizer.ggml.add_space_prefix"));
  }
  if (f.has("tokenhive.tokenizer.nfc")) {
    TH_ASSIGN_OR_RETURN(v.nfc, f.get_bool("tokenhive.tokenizer.nfc"));
  }
  if (v.model == TokenizerModel::Spm && f.has("tokenhive.tokenizer.spm_merges")) {
    TH_ASSIGN_OR_RETURN(v.spm_merges, f.get_bool("tokenhive.tokenizer.spm_merges"));
    if (v.spm_merges) {
      if (!f.has("tokenizer.ggml.merges"))
        return Status::errorf(f.name(), ": tokenhive.tokenizer.spm_merges without tokenizer.ggml.merges");
      TH_ASSIGN_OR_RETURN(const GgufArray* merges, typed_array(f, "tokenizer.ggml.merges", {GgufType::STRING}));
      v.merges = merges->strings;
    }
  }
  return v;
}

}  // namespace th
