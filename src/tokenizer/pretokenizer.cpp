#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>


#include "tokenizer/unicode.h"

namespace th {

namespace {

// The regex lists are llama.cpp's (llm_tokenizer_bpe), character for character,
// with non-ASCII characters written as \x{...}.

constexpr const char* kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr const char* kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kTekken =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|"
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kGpt4o =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kBailing =
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+";
constexpr const char* kSeedCoder =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kPoro =
    " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+";
constexpr const char* kCjk = "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";
// The cased letters (Lu, Ll, Lt) as DeepSeek's tokenizer.json lists them.
constexpr const char* kDeepseekLetters =
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
    "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}"
    "\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}"
    "\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}"
    "\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}"
    "\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"
    "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}"
    "\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}"
    "\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}"
    "\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}"
    "\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}"
    "\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}"
    "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}"
    "\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}"
    "\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}"
    "\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+";
constexpr const char* kDeepseekPunct =
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+";

struct PreTokenizerDef {
  std::vector<std::string_view> names;
  std::vector<const char*> regexes;
  PreTokenizerTraits traits;
};

const std::vector<PreTokenizerDef>& definitions() {
  static const std::vector<PreTokenizerDef> defs = {
      {{"default"}, {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"}, {}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {kLlama3},
       {.ignore_merges = true, .add_bos = true}},
      {{"dbrx", "smaug-bpe"}, {kLlama3}, {}},
      {{"chatglm-bpe", "glm4"}, {kLlama3}, {.no_bos = true}},
      {{"deepseek-llm"},
       {"[\r\n]", kDeepseekLetters, kDeepseekPunct, "\\s+$", kCjk, "\\p{N}+"},
       {}},
      {{"deepseek-coder"}, {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjk, "\\p{N}"}, {}},
      {{"falcon"}, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"}, {}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {"\\p{N}", kGpt2},
       {}},
      {{"gpt-2", "mpt", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es",
        "jina-v2-de", "jina-v2-code", "roberta-bpe", "olmo", "jais", "exaone4", "a.x-4.0",
        "mellum", "modern-bert", "trillion", "granite-docling"},
       {kGpt2},
       {}},
      {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan", "grok-2", "kormo",
        "solar-open"},
       {kQwen2},
       {}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {kPoro}, {}},
      {{"viking"}, {kPoro, "\\p{N}"}, {}},
      {{"tekken"}, {kTekken}, {.ignore_merges = true, .add_bos = true}},
      {{"chameleon"},
       {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )",
        "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", kGpt2},
       {.add_bos = true}},
      {{"gpt-4o", "llama4"}, {kGpt4o}, {}},
      {{"bailingmoe", "bailingmoe2", "llada-moe"}, {kBailing}, {}},
      {{"seed-coder"}, {kSeedCoder}, {}},
  };
  return defs;
}

const PreTokenizerDef* find_definition(std::string_view pre) {
  if (pre.empty()) pre = "default";
  for (const auto& d : definitions())
    for (std::string_view n : d.names)
      if (pre == n) return &d;
  return nullptr;
}

// What the regexes see in place of a code point. llama.cpp matches on a
// stand-in too: it turns every non-ASCII whitespace into U+000B because
// std::regex's \s knows only ASCII. Doing the same keeps PCRE2 in step, and
// the other stand-ins keep PCRE2's input valid UTF-8 and its \s equal to the
// White_Space property llama.cpp's tables use.
uint32_t stand_in(uint32_t cpt) {
  if (cpt > 0x7F && unicode::is_whitespace(cpt)) return 0x0B;
  if (cpt == 0x180E) return 0x200B;  // format char that PCRE2 counts as \s: use another Cf
  if (cpt >= 0xD800 && cpt <= 0xDFFF) return 0xE000;  // a surrogate: another \p{C}
  return cpt;
}

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};

struct ContextDeleter {
  void operator()(pcre2_match_context* c) const { pcre2_match_context_free(c); }
};

pcre2_match_context* roomy_context() {
  pcre2_match_context* c = pcre2_match_context_create(nullptr);
  pcre2_set_heap_limit(c, 1u << 20);  // KiB: 1 GiB
  pcre2_set_match_limit(c, UINT32_MAX);
  pcre2_set_depth_limit(c, UINT32_MAX);
  return c;
}

}  // namespace

const PreTokenizerTraits* find_pre_tokenizer_traits(std::string_view pre) {
  const PreTokenizerDef* d = find_definition(pre);
  return d ? &d->traits : nullptr;
}

struct PreTokenizer::Impl {
  PreTokenizerTraits traits;
  std::vector<std::unique_ptr<pcre2_code, CodeDeleter>> regexes;
};

PreTokenizer::PreTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

const PreTokenizerTraits& PreTokenizer::traits() const { return impl_->traits; }

Result<PreTokenizer> PreTokenizer::create(std::string_view pre) {
  const PreTokenizerDef* def = find_definition(pre);
  if (!def) return Status::errorf("unknown pre-tokenizer '", pre, "' (tokenizer.ggml.pre)");
  auto impl = std::make_unique<Impl>();
  impl->traits = def->traits;
  for (const char* re : def->regexes) {
    int err = 0;
    PCRE2_SIZE at = 0;
    // DOLLAR_ENDONLY: '$' means the end of the piece only, as in ECMAScript.
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re), PCRE2_ZERO_TERMINATED,
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &at,
                                     nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      return Status::errorf("pre-tokenizer '", pre, "': regex does not compile at offset ", at,
                            ": ", reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if unavailable
    impl->regexes.emplace_back(code);
  }
  return PreTokenizer(std::move(impl));
}

void PreTokenizer::split(std::string_view text, PreTokenized* out) const {
  if (text.empty()) return;
  const std::vector<uint32_t> cpts = unicode::decode_utf8(text);

  // The text the regexes match, and for each of its character starts the
  // index of the code point (pieces are kept in bytes of this text).
  std::string subject;
  subject.reserve(text.size() + 8);
  std::vector<uint32_t> offsets(cpts.size() + 1);
  for (size_t i = 0; i < cpts.size(); ++i) {
    offsets[i] = static_cast<uint32_t>(subject.size());
    unicode::append_utf8(subject, stand_in(cpts[i]));
  }
  offsets[cpts.size()] = static_cast<uint32_t>(subject.size());
  std::vector<uint32_t> cpt_at(subject.size() + 1, 0);
  for (size_t i = 0; i <= cpts.size(); ++i) cpt_at[offsets[i]] = static_cast<uint32_t>(i);

  std::vector<std::pair<size_t, size_t>> pieces{{0, subject.size()}}, next;
  pcre2_match_data* md = nullptr;
  std::unique_ptr<pcre2_match_context, ContextDeleter> roomy;
  for (const auto& re : impl_->regexes) {
    pcre2_match_data_free(md);
    md = pcre2_match_data_create_from_pattern(re.get(), nullptr);
    next.clear();
    next.reserve(pieces.size() * 2);
    for (const auto& [begin, end] : pieces) {
      const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data() + begin);
      const size_t len = end - begin;
      size_t pos = 0, last = 0;
      while (pos < len) {
        int rc = pcre2_match(re.get(), s, len, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT || rc == PCRE2_ERROR_MATCHLIMIT ||
            rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT) {
          // A long run of letters through a repeated group (tekken, gpt-4o)
          // outgrows the JIT's stack: redo it with the interpreter and room.
          if (!roomy) roomy.reset(roomy_context());
          rc = pcre2_match(re.get(), s, len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, roomy.get());
        }
        // No match, or still out of room: the rest stays one piece.
        if (rc < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t mb = ov[0], me = ov[1];
        if (me == mb) {  // none of llama.cpp's regexes match empty; step over a character
          pos = mb + unicode::utf8_len(static_cast<char>(s[mb]));
          continue;
        }
        if (mb > last) next.emplace_back(begin + last, begin + mb);
        next.emplace_back(begin + mb, begin + me);
        last = pos = me;
      }
      if (last < len) next.emplace_back(begin + last, end);
    }
    pieces.swap(next);
  }
  pcre2_match_data_free(md);

  // Each word: its code points as UTF-8 again (so an invalid byte is now
  // EF BF BD), every byte then shown as its bytes_to_unicode character.
  std::string utf8;
  for (const auto& [begin, end] : pieces) {
    utf8.clear();
    for (uint32_t i = cpt_at[begin], e = cpt_at[end]; i < e; ++i) unicode::append_utf8(utf8, cpts[i]);
    const size_t start = out->text.size();
    for (char c : utf8) out->text += unicode::byte_to_utf8(static_cast<uint8_t>(c));
    out->spans.emplace_back(static_cast<uint32_t>(start),
                            static_cast<uint32_t>(out->text.size() - start));
  }
}

}  // namespace th
