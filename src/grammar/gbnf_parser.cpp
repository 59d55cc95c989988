#include "grammar/gbnf_parser.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace th::grammar {

namespace {

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const GrammarLimits& limits) : s_(text), b_(limits) {}

  Result<Grammar> parse() {
    if (s_.size() > b_.limits().max_text_bytes)
      return Status::errorf("the grammar is ", s_.size(), " bytes, over the limit of ", b_.limits().max_text_bytes);
    skip(true);
    while (i_ < s_.size()) {
      if (Status st = rule_definition(); !st.ok()) return where(st);
      skip(true);
    }
    Result<Grammar> g = b_.finish("root");
    if (!g.ok()) return Status::error(g.message());
    return g;
  }

 private:
  Status where(const Status& st) const {
    int line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') line += 1, col = 1;
      else ++col;
    }
    return Status::errorf("line ", line, ", column ", col, ": ", st.message());
  }
  bool at(char c) const { return i_ < s_.size() && s_[i_] == c; }
  bool at(std::string_view t) const { return s_.substr(i_, t.size()) == t; }

  // Spaces, tabs and comments; newlines too when `newlines`.
  void skip(bool newlines) {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++i_;
      } else if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  std::string_view name() {
    const size_t start = i_;
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    return s_.substr(start, i_ - start);
  }

  Status rule_definition() {
    const std::string_view n = name();
    if (n.empty()) return Status::error("expected a rule name");
    skip(false);
    if (!at("::=")) return Status::errorf("expected '::=' after rule name '", n, "'");
    i_ += 3;
    skip(true);
    TH_ASSIGN_OR_RETURN(uint32_t r, b_.rule(n));
    if (b_.defined(r)) return Status::errorf("rule '", n, "' is defined twice");
    std::vector<Alternative> alts;
    TH_RETURN_IF_ERROR(alternatives(0, alts));
    if (i_ < s_.size() && !at('\n')) return Status::errorf("unexpected '", s_[i_], "'");
    return b_.define(r, std::move(alts));
  }

  Status alternatives(int depth, std::vector<Alternative>& out) {
    if (depth > b_.limits().max_depth) return Status::errorf("groups nest deeper than ", b_.limits().max_depth);
    out.emplace_back();
    TH_RETURN_IF_ERROR(sequence(depth, out.back()));
    while (at('|')) {
      ++i_;
      skip(true);
      out.emplace_back();
      TH_RETURN_IF_ERROR(sequence(depth, out.back()));
    }
    return ok_status();
  }

  Status sequence(int depth, Alternative& seq) {
    const bool nested = depth > 0;
    while (i_ < s_.size() && !at('|') && !at(')') && !at('\n')) {
      const size_t start = seq.size();
      TH_RETURN_IF_ERROR(atom(depth, seq));
      skip(nested);
      if (at('*') || at('+') || at('?') || at('{')) {
        int min = 0, max = -1;
        TH_RETURN_IF_ERROR(repetition(&min, &max));
        // The whole item repeats: a literal's bytes together.
        Alternative item(seq.begin() + static_cast<std::ptrdiff_t>(start), seq.end());
        seq.resize(start);
        TH_ASSIGN_OR_RETURN(Element e, b_.group({std::move(item)}));
        TH_RETURN_IF_ERROR(b_.repeat(e, min, max, seq));
        skip(nested);
        if (at('*') || at('+') || at('?') || at('{'))
          return Status::error("a repetition must follow an item, not another repetition (use a group)");
      }
    }
    return ok_status();
  }

  Status atom(int depth, Alternative& seq) {
    const char c = s_[i_];
    if (c == '"') return literal(seq);
    if (c == '[') return char_class(seq);
    if (c == '.') {
      ++i_;
      return b_.char_class({}, true, seq);
    }
    if (c == '(') {
      ++i_;
      skip(true);
      std::vector<Alternative> alts;
      TH_RETURN_IF_ERROR(alternatives(depth + 1, alts));
      if (!at(')')) return Status::error("expected ')'");
      ++i_;
      TH_ASSIGN_OR_RETURN(Element e, b_.group(std::move(alts)));
      seq.push_back(e);
      return ok_status();
    }
    if (name_char(c)) {
      const std::string_view n = name();
      skip(depth > 0);
      if (at("::=")) return Status::errorf("rule '", n, "' starts where the previous rule has not ended (a newline is missing)");
      TH_ASSIGN_OR_RETURN(uint32_t r, b_.rule(n));
      seq.push_back(GrammarBuilder::ref(r));
      return ok_status();
    }
    return Status::errorf("unexpected '", c, "'");
  }

  Status repetition(int* min, int* max) {
    const char c = s_[i_++];
    if (c == '*') return ok_status();
    if (c == '+') return *min = 1, ok_status();
    if (c == '?') return *max = 1, ok_status();
    skip(false);
    TH_ASSIGN_OR_RETURN(int m, number());
    *min = m;
    *max = m;
    skip(false);
    if (at(',')) {
      ++i_;
      skip(false);
      *max = -1;
      if (!at('}')) {
        TH_ASSIGN_OR_RETURN(int n, number());
        *max = n;
        skip(false);
      }
    }
    if (!at('}')) return Status::error("expected '}' to close a repetition");
    ++i_;
    return ok_status();
  }

  Result<int> number() {
    const size_t start = i_;
    int64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9' && i_ - start < 9) v = v * 10 + (s_[i_++] - '0');
    if (i_ == start) return Status::error("expected a number in a repetition");
    if (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') return Status::error("a repetition count is too large");
    return static_cast<int>(v);
  }

  // One UTF-8 character or escape of a literal or class, as a code point.
  Result<uint32_t> character() {
    if (i_ >= s_.size()) return Status::error("unexpected end of grammar");
    const auto c = static_cast<unsigned char>(s_[i_]);
    if (c == '\\') {
      if (++i_ >= s_.size()) return Status::error("unexpected end of grammar after '\\'");
      const char e = s_[i_++];
      switch (e) {
        case 'n': return uint32_t{'\n'};
        case 'r': return uint32_t{'\r'};
        case 't': return uint32_t{'\t'};
        case '\\': case '"': case '[': case ']': case '-': case '^': return static_cast<uint32_t>(e);
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        default: return Status::errorf("unknown escape '\\", e, "'");
      }
    }
    const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i_ + n > s_.size()) return Status::error("invalid UTF-8");
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto d = static_cast<unsigned char>(s_[i_ + k]);
      if ((d & 0xC0) != 0x80) return Status::error("invalid UTF-8");
      cp = (cp << 6) | (d & 0x3F);
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return Status::error("invalid UTF-8");
    i_ += n;
    return cp;
  }

  Result<uint32_t> hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k, ++i_) {
      if (i_ >= s_.size()) return Status::error("unexpected end of grammar in a \\x, \\u or \\U escape");
      const char h = s_[i_];
      const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) return Status::errorf("expected a hex digit, got '", h, "'");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    if (v > 0x10FFFF) return Status::error("a code point above U+10FFFF");
    return v;
  }

  Status literal(Alternative& seq) {
    ++i_;
    std::string bytes;
    while (!at('"')) {
      if (i_ >= s_.size() || at('\n')) return Status::error("a literal is not closed with '\"'");
      TH_ASSIGN_OR_RETURN(uint32_t cp, character());
      append_utf8(cp, bytes);
    }
    ++i_;
    b_.literal(bytes, seq);
    return ok_status();
  }

  Status char_class(Alternative& seq) {
    ++i_;
    const bool negated = at('^');
    if (negated) ++i_;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    while (!at(']')) {
      if (i_ >= s_.size() || at('\n')) return Status::error("a character class is not closed with ']'");
      TH_ASSIGN_OR_RETURN(uint32_t lo, character());
      uint32_t hi = lo;
      if (at('-') && i_ + 1 < s_.size() && s_[i_ + 1] != ']') {
        ++i_;
        TH_ASSIGN_OR_RETURN(uint32_t h, character());
        if (h < lo) return Status::error("a character range runs backwards");
        hi = h;
      }
      ranges.push_back({lo, hi});
    }
    ++i_;
    return b_.char_class(std::move(ranges), negated, seq);
  }

  std::string_view s_;
  size_t i_ = 0;
  GrammarBuilder b_;
};

}  // namespace

Result<Grammar> parse_gbnf(std::string_view text, const GrammarLimits& limits) {
  Result<Grammar> g = GbnfParser(text, limits).parse();
  if (!g.ok()) return printable(g.status());
  return g;
}

}  // namespace th::grammar
