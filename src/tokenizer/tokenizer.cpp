// Tokenizer: vocabulary checks and the per-token tables, special-token
// splitting, dispatch to the SPM / BPE encoders, and decoding.
//
// Decoding convention (decode and Detokenizer alike): a token's piece is the
// bytes it stands for (SPM: U+2581 -> ' ', <0xNN> -> that byte; BPE: the
// bytes_to_unicode characters -> their bytes). When the vocab adds a space
// prefix (SPM), the piece right after BOS loses its leading space: that space
// is the dummy prefix the encoder added. llama2.c does exactly this; llama.cpp
// drops it from the first token of whatever it detokenizes, which would also
// eat the real space that starts a chunk of generated text, so here a
// sequence that does not start with BOS keeps it. Nothing else is dropped or
// cleaned (llama.cpp's clean_up_tokenization_spaces is not applied), so for
// BPE decode(encode(x)) == x for valid UTF-8 x, and for SPM
// decode(encode(x, add_special=true)) == x.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <optional>

#include "format/gguf.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/spm_tokenizer.h"
#include "tokenizer/token_index.h"
#include "tokenizer/unicode.h"
#include "tokenizer/unicode_nfc.h"

namespace th {

namespace {

// llama.cpp's token attributes (a bit set: the text-based fix-ups below add
// CONTROL to what token_type says).
enum Attr : uint32_t {
  kUnknown = 1u << 0,
  kUnused = 1u << 1,
  kNormal = 1u << 2,
  kControl = 1u << 3,
  kUserDefined = 1u << 4,
  kByte = 1u << 5,
};

uint32_t attr_of(TokenType t) {
  switch (t) {
    case TokenType::Normal: return kNormal;
    case TokenType::Unknown: return kUnknown;
    case TokenType::Control: return kControl;
    case TokenType::UserDefined: return kUserDefined;
    case TokenType::Unused: return kUnused;
    case TokenType::Byte: return kByte;
    default: return 0;  // undefined: renders as nothing, like llama.cpp
  }
}

constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";  // U+2581

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  out.append(s, pos);
  s.swap(out);
}

// Byte of a <0xNN> token (llama.cpp reads the two hex digits with strtol).
std::string byte_piece(const std::string& text) {
  if (text.size() < 5) return std::string(1, '\0');
  return std::string(1, static_cast<char>(std::strtol(text.substr(3, 2).c_str(), nullptr, 16)));
}

// BPE: each character of a token stands for one byte (llama_decode_text).
std::string bpe_piece(const std::string& text) {
  std::string out;
  for (uint32_t cpt : unicode::decode_utf8(text)) {
    uint8_t b;
    if (unicode::utf8_cpt_to_byte(cpt, &b)) {
      out.push_back(static_cast<char>(b));
      continue;
    }
    std::string utf8;
    unicode::append_utf8(utf8, cpt);
    static constexpr char kHex[] = "0123456789abcdef";
    out += "[UNK_BYTE_0x";
    for (unsigned char c : utf8) {
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
    out += text + "]";
  }
  return out;
}

// Token texts llama.cpp treats specially whatever token_type says
// (llama_vocab::impl::load). Where it picks one token of a kind, it takes the
// first it meets in a hash map; here the first in list order is taken.
const std::vector<std::string_view> kEotTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",
    "<end_of_utterance>"};
const std::vector<std::string_view> kEomTexts = {"<|eom_id|>"};
const std::vector<std::vector<std::string_view>> kFimTexts = {
    {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
     "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"},
    {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
     "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"},
    {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
     "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"},
};
// FIM pad / repo / file-separator tokens also end generation.
const std::vector<std::vector<std::string_view>> kFimEogTexts = {
    {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
    {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
    {"<|file_sep|>"},
};
const std::vector<std::string_view> kEogTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "<|end_of_text|>",
    "<end_of_utterance>"};
// gpt-oss: always rendered, never control.
const std::vector<std::string_view> kAlwaysUserDefined = {"<|channel|>", "<|message|>", "<|start|>",
                                                          "<|constrain|>"};

// Which special tokens occur in a text, by a trie walk from every position:
// most positions fail at the root, so this stays linear in practice even for
// vocabs with thousands of special tokens.
class SpecialTrie {
 public:
  void insert(std::string_view key, int32_t value) {
    int node = 0;
    for (unsigned char c : key) {
      int next = child(node, c);
      if (next < 0) {
        next = static_cast<int>(nodes_.size());
        nodes_.emplace_back();
        if (node == 0) {
          root_[c] = next;
        } else {
          auto& e = nodes_[node].edges;
          e.insert(std::lower_bound(e.begin(), e.end(), std::make_pair(c, 0)), {c, next});
        }
      }
      node = next;
    }
    nodes_[node].value = value;
  }

  /// Calls f(value) for every key that occurs somewhere in `text` (repeats included).
  template <class F>
  void for_each_occurrence(std::string_view text, F&& f) const {
    for (size_t i = 0; i < text.size(); ++i) {
      int node = root_[static_cast<unsigned char>(text[i])];
      for (size_t j = i + 1; node >= 0; ++j) {
        if (nodes_[node].value >= 0) f(nodes_[node].value);
        if (j == text.size()) break;
        node = child(node, static_cast<unsigned char>(text[j]));
      }
    }
  }

  SpecialTrie() {
    nodes_.emplace_back();
    root_.fill(-1);
  }

 private:
  struct Node {
    int32_t value = -1;
    std::vector<std::pair<unsigned char, int>> edges;  // sorted
  };
  int child(int node, unsigned char c) const {
    if (node == 0) return root_[c];
    const auto& e = nodes_[node].edges;
    auto it = std::lower_bound(e.begin(), e.end(), std::make_pair(c, 0));
    return (it != e.end() && it->first == c) ? it->second : -1;
  }
  std::array<int, 256> root_;
  std::vector<Node> nodes_;
};

struct Fragment {
  int32_t token;       // -1 for raw text
  size_t begin, size;  // raw text span
};

}  // namespace

struct Tokenizer::Impl {
  VocabData v;
  TokenIndex index;
  std::vector<uint32_t> attrs;
  std::vector<std::string> pieces;  // as token_to_piece(id, render_special=true)
  std::vector<int32_t> specials;    // control / user-defined / unknown ids, longest text first
  SpecialTrie special_trie;         // text -> position in `specials`
  std::vector<int32_t> eog;         // sorted
  SpmModel spm;
  std::optional<PreTokenizer> pre;
  std::optional<BpeRanks> ranks;
  bool ignore_merges = false;

  Status init();
  Status check() const;
  void mark_specials();
  void partition(std::string_view text, bool parse_special, std::vector<Fragment>* out) const;
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
};

// What the vocab must hold for the rest of init() to be safe.
Status Tokenizer::Impl::check() const {
  if (v.model == TokenizerModel::Wpm)
    return Status::error("WordPiece tokenizers are not supported yet (tokenizer.ggml.model = 'bert')");
  const size_t n = v.tokens.size();
  if (n == 0) return Status::error("the vocabulary has no tokens (tokenizer.ggml.tokens is empty)");
  if (n > static_cast<size_t>(INT32_MAX)) return Status::errorf("the vocabulary has too many tokens (", n, ")");
  if (!v.scores.empty() && v.scores.size() != n)
    return Status::errorf("tokenizer.ggml.scores has ", v.scores.size(), " entries for ", n, " tokens");
  if (!v.types.empty() && v.types.size() != n)
    return Status::errorf("tokenizer.ggml.token_type has ", v.types.size(), " entries for ", n,
                          " tokens");
  const std::pair<const char*, int32_t> ids[] = {
      {"bos", v.bos}, {"eos", v.eos}, {"unknown", v.unk}, {"padding", v.pad}, {"eot", v.eot}};
  for (const auto& [name, id] : ids)
    if (id != -1 && (id < 0 || static_cast<size_t>(id) >= n))
      return Status::errorf(name, " token id ", id, " is out of range for a vocabulary of ", n,
                            " tokens");
  if (v.add_bos && v.bos < 0)
    return Status::error("add_bos_token is set but the vocabulary has no BOS token");
  if (v.add_eos && v.eos < 0)
    return Status::error("add_eos_token is set but the vocabulary has no EOS token");
  return ok_status();
}

// Text-based fix-ups (llama.cpp marks these control whatever the file says,
// which matters for what parse_special=false still splits out), and the
// end-of-generation tokens.
void Tokenizer::Impl::mark_specials() {
  auto find_first = [&](const std::vector<std::string_view>& texts) -> int32_t {
    for (auto t : texts)
      if (int32_t id = index.find(t); id >= 0) return id;
    return -1;
  };
  auto force_control = [&](int32_t id) {
    if (id >= 0) attrs[id] |= kControl;
  };
  int32_t eot = v.eot;
  if (eot < 0) force_control(eot = find_first(kEotTexts));
  const int32_t eom = find_first(kEomTexts);
  force_control(eom);
  for (const auto& texts : kFimTexts) force_control(find_first(texts));
  for (const auto& texts : kFimEogTexts) {
    const int32_t id = find_first(texts);
    force_control(id);
    if (id >= 0) eog.push_back(id);
  }
  for (auto t : kEogTexts) {
    const int32_t id = index.find(t);
    force_control(id);
    if (id >= 0) eog.push_back(id);
  }
  for (auto t : kAlwaysUserDefined)
    if (int32_t id = index.find(t); id >= 0) attrs[id] = kUserDefined;
  for (int32_t id : {v.eos, eot, eom})
    if (id >= 0) eog.push_back(id);
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  // o200k_harmony: with <|return|> and <|call|> present, <|end|> ends a message, not generation.
  {
    const int32_t ret = index.find("<|return|>"), call = index.find("<|call|>"),
                  end = index.find("<|end|>");
    auto in_eog = [&](int32_t id) { return id >= 0 && std::binary_search(eog.begin(), eog.end(), id); };
    if (in_eog(ret) && in_eog(call) && in_eog(end)) {
      eog.erase(std::find(eog.begin(), eog.end(), end));
      attrs[end] = kUserDefined;
    }
  }
}

Status Tokenizer::Impl::init() {
  TH_RETURN_IF_ERROR(check());
  const size_t n = v.tokens.size();
  index.reserve(n);
  attrs.resize(n);
  for (size_t i = 0; i < n; ++i) {
    std::string& text = v.tokens[i];
    if (text.empty()) text = cat("[EMPTY_", i, "]");  // llama.cpp's stand-in for an empty token
    if (!index.insert(text, static_cast<int32_t>(i)))
      return Status::errorf("token ", i, " ('", text, "') repeats token ", index.find(text));
    attrs[i] = v.types.empty() ? kNormal : attr_of(v.types[i]);
  }

  if (v.model == TokenizerModel::Bpe) {
    TH_ASSIGN_OR_RETURN(PreTokenizer p, PreTokenizer::create(v.pre));
    ignore_merges = p.traits().ignore_merges;
    pre.emplace(std::move(p));
    TH_ASSIGN_OR_RETURN(BpeRanks r, BpeRanks::create(v.merges));
    ranks.emplace(std::move(r));
  }

  mark_specials();

  for (size_t i = 0; i < n; ++i)
    if (attrs[i] & (kControl | kUserDefined | kUnknown)) specials.push_back(static_cast<int32_t>(i));
  // Longest first (llama.cpp's sort is not stable; ties here go by id).
  std::stable_sort(specials.begin(), specials.end(), [&](int32_t a, int32_t b) {
    return v.tokens[a].size() > v.tokens[b].size();
  });
  for (size_t k = 0; k < specials.size(); ++k)
    special_trie.insert(v.tokens[specials[k]], static_cast<int32_t>(k));

  pieces.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t a = attrs[i];
    const std::string& text = v.tokens[i];
    if (a & (kUnknown | kControl | kUserDefined)) {
      pieces[i] = text;
    } else if (a & kNormal) {
      if (v.model == TokenizerModel::Spm) {
        pieces[i] = text;
        replace_all(pieces[i], kEscapedSpace, " ");
      } else {
        pieces[i] = bpe_piece(text);
      }
    } else if (a & kByte) {
      pieces[i] = byte_piece(text);
    }
  }

  if (v.model == TokenizerModel::Spm) {
    if (v.spm_merges) {
      TH_ASSIGN_OR_RETURN(BpeRanks r, BpeRanks::create(v.merges));
      ranks.emplace(std::move(r));
      spm.ranks = &*ranks;
    }
    spm.index = &index;
    spm.scores = &v.scores;
    spm_index_spaces(v.tokens, &spm);
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      const char hex[] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
      int32_t id = index.find(std::string_view(hex, sizeof hex));
      if (id < 0) id = index.find(std::string(1, static_cast<char>(b)));
      // llama.cpp aborts here; falling back to <unk> keeps encode total.
      spm.byte_tokens[b] = id >= 0 ? id : v.unk;
    }
  }
  return ok_status();
}

// llama.cpp's tokenizer_st_partition: special tokens, longest first, each
// taking its leftmost non-overlapping occurrences in the text the longer ones
// left. Control and unknown tokens count only with parse_special;
// user-defined tokens always do.
void Tokenizer::Impl::partition(std::string_view text, bool parse_special,
                                std::vector<Fragment>* out) const {
  out->clear();
  if (text.empty()) return;
  std::vector<char> occurs(specials.size(), 0);
  bool any = false;
  special_trie.for_each_occurrence(text, [&](int32_t k) {
    if (!parse_special && (attrs[specials[k]] & (kControl | kUnknown))) return;
    occurs[k] = 1;
    any = true;
  });
  if (!any) {
    out->push_back({-1, 0, text.size()});
    return;
  }
  std::vector<char> taken(text.size(), 0);
  std::vector<Fragment> hits;
  for (size_t k = 0; k < specials.size(); ++k) {
    if (!occurs[k]) continue;
    const std::string& s = v.tokens[specials[k]];
    for (size_t from = 0, p; (p = text.find(s, from)) != std::string_view::npos;) {
      if (std::find(taken.begin() + p, taken.begin() + p + s.size(), 1) != taken.begin() + p + s.size()) {
        from = p + 1;
        continue;
      }
      std::fill(taken.begin() + p, taken.begin() + p + s.size(), 1);
      hits.push_back({specials[k], p, s.size()});
      from = p + s.size();
    }
  }
  std::sort(hits.begin(), hits.end(), [](const Fragment& a, const Fragment& b) { return a.begin < b.begin; });
  size_t at = 0;
  for (const Fragment& h : hits) {
    if (h.begin > at) out->push_back({-1, at, h.begin - at});
    out->push_back(h);
    at = h.begin + h.size;
  }
  if (at < text.size()) out->push_back({-1, at, text.size() - at});
}

std::vector<int32_t> Tokenizer::Impl::encode(std::string_view text, bool add_special,
                                             bool parse_special) const {
  std::vector<Fragment> frags;
  partition(text, parse_special, &frags);
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && v.add_bos) out.push_back(v.bos);

  if (v.model == TokenizerModel::Spm) {
    bool after_special = true;  // the text start counts as after a special token
    std::string buf;
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        out.push_back(f.token);
        after_special = true;
        continue;
      }
      buf.clear();
      if (v.add_space_prefix && after_special) buf.push_back(' ');
      if (v.nfc) {
        buf.append(unicode::to_nfc(text.substr(f.begin, f.size)));
      } else {
        buf.append(text.substr(f.begin, f.size));
      }
      replace_all(buf, " ", kEscapedSpace);
      spm_encode(spm, buf, &out);
      after_special = false;
    }
  } else {
    PreTokenized words;
    BpeScratch scratch;
    // Words repeat a lot in real text; remembering their ids for the length of
    // this call saves most of the merging.
    constexpr size_t kMaxCachedWord = 64, kMaxCacheEntries = 1 << 16;
    StringTable cache;
    std::vector<std::pair<uint32_t, uint32_t>> cache_spans;
    std::vector<int32_t> cache_ids;
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        out.push_back(f.token);
        continue;
      }
      words.clear();
      // As Hugging Face's tokenizers: added tokens are split out of the raw text, and the
      // normalizer sees only the text between them.
      if (v.nfc && !unicode::nfc_quick_yes(text.substr(f.begin, f.size))) {
        pre->split(unicode::to_nfc(text.substr(f.begin, f.size)), &words);
      } else {
        pre->split(text.substr(f.begin, f.size), &words);
      }
      const std::string_view all(words.text);
      for (const auto& [b, len] : words.spans) {
        const std::string_view word = all.substr(b, len);
        const bool cacheable = word.size() <= kMaxCachedWord;
        if (cacheable) {
          if (const int32_t c = cache.find(word); c >= 0) {
            const auto [at, n] = cache_spans[c];
            out.insert(out.end(), cache_ids.begin() + at, cache_ids.begin() + at + n);
            continue;
          }
        }
        const size_t before = out.size();
        bpe_encode_word(word, index, *ranks, ignore_merges, &scratch, &out);
        if (cacheable && cache.size() < kMaxCacheEntries) {
          cache.insert(word, static_cast<int32_t>(cache_spans.size()));
          cache_spans.emplace_back(static_cast<uint32_t>(cache_ids.size()),
                                   static_cast<uint32_t>(out.size() - before));
          cache_ids.insert(cache_ids.end(), out.begin() + before, out.end());
        }
      }
    }
  }

  if (add_special && v.add_eos) out.push_back(v.eos);
  return out;
}

// ---------------------------------------------------------------- Tokenizer

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::create(VocabData vocab) {
  auto impl = std::make_unique<Impl>();
  impl->v = std::move(vocab);
  TH_RETURN_IF_ERROR(impl->init());
  return Tokenizer(std::move(impl));
}

Result<Tokenizer> Tokenizer::from_gguf(const GgufFile& f) {
  TH_ASSIGN_OR_RETURN(VocabData v, vocab_from_gguf(f));
  return create(std::move(v));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  return impl_->encode(text, add_special, parse_special);
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  if (id < 0 || id >= n_vocab()) return {};
  if (!render_special && (impl_->attrs[id] & (kControl | kUnknown))) return {};
  return impl_->pieces[id];
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  const bool prefix = impl_->v.add_space_prefix;
  std::string out;
  bool after_bos = false;
  for (int32_t id : ids) {
    if (id < 0 || id >= n_vocab()) continue;
    if (!render_special && (impl_->attrs[id] & (kControl | kUnknown))) {
      after_bos = id == impl_->v.bos;
      continue;
    }
    std::string_view piece = impl_->pieces[id];
    if (after_bos && prefix && !piece.empty() && piece[0] == ' ') piece.remove_prefix(1);
    after_bos = id == impl_->v.bos;
    out.append(piece);
  }
  return out;
}

const VocabData& Tokenizer::vocab() const { return impl_->v; }
int32_t Tokenizer::n_vocab() const { return static_cast<int32_t>(impl_->v.tokens.size()); }
int32_t Tokenizer::bos() const { return impl_->v.bos; }
int32_t Tokenizer::eos() const { return impl_->v.eos; }

bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && std::binary_search(impl_->eog.begin(), impl_->eog.end(), id);
}

std::vector<int32_t> end_of_generation_ids(const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < tok.n_vocab(); ++i)
    if (tok.is_eog(i) || i == tok.bos()) ids.push_back(i);
  return ids;
}

// ---------------------------------------------------------------- Detokenizer

std::string Detokenizer::push(int32_t id) {
  const bool render = !rendered_.empty() && std::find(rendered_.begin(), rendered_.end(), id) != rendered_.end();
  std::string piece = tok_->token_to_piece(id, render);
  if (prev_ >= 0 && prev_ == tok_->bos() && tok_->vocab().add_space_prefix && !piece.empty() &&
      piece[0] == ' ')
    piece.erase(0, 1);
  prev_ = id;
  pending_ += piece;
  return unicode::drain_utf8(pending_, /*final=*/false);
}

std::string Detokenizer::flush() {
  prev_ = -1;
  return unicode::drain_utf8(pending_, /*final=*/true);
}

}  // namespace th
