// libFuzzer target for the grammar engine. The first byte picks what the rest is, up to a
// 0xFF byte: GBNF text (0), a JSON schema (1, strict when the byte is 0x81) or a regex (2);
// the bytes after the 0xFF are run through the compiled grammar. Whatever the input, nothing
// may crash or run away (small limits), and: every error is one line; a schema or regex
// that compiles gives GBNF that parses; the matcher's token mask over a small vocabulary
// equals trying each token's bytes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex_grammar.h"
#include "grammar/token_trie.h"

namespace {

using namespace th::grammar;
using th::Result;

[[noreturn]] void die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "grammar_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

void one_line(const std::string& m) {
  if (m.empty() || m.find('\n') != std::string::npos) die("an error is not one line", m);
}

// Every single byte, and some pairs and words a JSON or text vocabulary has.
const std::vector<std::string>& pieces() {
  static const std::vector<std::string> p = [] {
    std::vector<std::string> v;
    for (int b = 0; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
    for (const char* w : {"{\"", "\":", "\",", "true", "null", "  ", "\\n", "ab", "abc", "\xC3\xA9", "\xE4\xB8\xAD", "12", ""})
      v.push_back(w);
    return v;
  }();
  return p;
}

void run(const std::shared_ptr<const Grammar>& g, std::string_view bytes) {
  static const TokenTrie trie(pieces());
  Matcher m(g);
  std::vector<uint64_t> mask;
  for (size_t i = 0; i <= bytes.size() && i < 64; ++i) {
    Matcher before = m;  // its own caches: the walk's never answer for it
    m.allowed_tokens(trie, mask);
    for (size_t id = 0; id < pieces().size(); ++id) {
      bool want = !pieces()[id].empty() && before.accepts(pieces()[id]);
      if (id % 16 == 0) {  // and accept() itself, from a copy
        Matcher copy = before;
        if (want != (!pieces()[id].empty() && copy.accept(pieces()[id]))) die("accepts() and accept() differ", pieces()[id]);
      }
      if (want != (((mask[id >> 6] >> (id & 63)) & 1) != 0)) die("the mask differs from trying the token", pieces()[id]);
    }
    if (i == bytes.size() || !m.accept(bytes.substr(i, 1))) break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t sep = all.find('\xFF');
  const std::string_view text = all.substr(0, sep);
  const std::string_view tail = sep == std::string_view::npos ? std::string_view() : all.substr(sep + 1);
  GrammarLimits limits;
  limits.max_elements = 20000;
  limits.max_rules = 2000;
  limits.max_repeat = 50;
  std::string gbnf;
  switch (data[0] & 0x7F) {
    case 0: gbnf = text; break;
    case 1: {
      const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text, nullptr, false);
      if (schema.is_discarded()) return 0;
      Result<std::string> r = json_schema_to_gbnf(schema, {.strict = (data[0] & 0x80) != 0});
      if (!r.ok()) return one_line(r.message()), 0;
      gbnf = *r;
      break;
    }
    case 2: {
      Result<std::string> r = regex_to_gbnf(text, {.json_string = (data[0] & 0x80) != 0});
      if (!r.ok()) return one_line(r.message()), 0;
      gbnf = "root ::= " + *r + "\n";
      break;
    }
    default: return 0;
  }
  Result<Grammar> g = parse_gbnf(gbnf, limits);
  if (!g.ok()) {
    one_line(g.message());
    // What the compilers write must parse, unless it only ran into the small limits.
    if ((data[0] & 0x7F) != 0 && g.message().find("too large") == std::string::npos &&
        g.message().find("out of range") == std::string::npos)
      die("a compiled schema or regex is not valid GBNF", g.message() + "\n" + gbnf);
    return 0;
  }
  run(std::make_shared<const Grammar>(std::move(g).value()), tail);
  return 0;
}
