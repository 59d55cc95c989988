#include "tokenizer/jinja_lexer.h"

#include <cstring>

#include "tokenizer/jinja_value.h"
#include "tokenizer/unicode.h"

namespace th::jinja {

const char* tok_name(Tok t) {
  static const char* kNames[] = {
      "text", "number", "string", "name", "'='", "'('", "')'", "'{%'", "'%}'", "'{{'", "'}}'",
      "'['", "']'", "'{'", "'}'", "','", "'.'", "':'", "'|'", "operator", "operator", "'**'",
      "comparison", "unary operator", "comment", "end of template",
  };
  return kNames[static_cast<int>(t)];
}

std::pair<int, int> Source::line_col(uint32_t pos) const {
  uint32_t off = pos < origin.size() ? origin[pos] : static_cast<uint32_t>(original.size());
  if (off > original.size()) off = static_cast<uint32_t>(original.size());
  int line = 1, col = 1;
  for (uint32_t i = 0; i < off; ++i) {
    const auto c = static_cast<unsigned char>(original[i]);
    if (c == '\n') {
      ++line;
      col = 1;
    } else if ((c & 0xC0) != 0x80) {
      ++col;
    }
  }
  return {line, col};
}

namespace {

struct Text {
  std::string s;
  std::vector<uint32_t> o;
  void put(const Text& from, size_t i) {
    s += from.s[i];
    o.push_back(from.o[i]);
  }
  void put_range(const Text& from, size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) put(from, i);
  }
};

bool at_line_start(const std::string& s, size_t i) {
  if (i == 0) return true;
  const char p = s[i - 1];
  if (p == '\n' || p == '\r') return true;
  // U+2028 / U+2029 end lines for JavaScript's ^ too.
  return i >= 3 && s.compare(i - 3, 2, "\xE2\x80") == 0 &&
         (s[i - 1] == '\xA8' || s[i - 1] == '\xA9');
}

Text lstrip_blocks(const Text& in) {
  Text out;
  const std::string& s = in.s;
  for (size_t i = 0; i < s.size();) {
    if (at_line_start(s, i)) {
      size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j + 1 < s.size() && s[j] == '{' && std::strchr("#%-", s[j + 1]) && s[j + 1] != '\0') {
        i = j;  // drop the indentation before the tag
      }
    }
    out.put(in, i);
    ++i;
  }
  return out;
}

Text trim_blocks(const Text& in) {
  Text out;
  const std::string& s = in.s;
  for (size_t i = 0; i < s.size(); ++i) {
    out.put(in, i);
    if (i + 2 < s.size() && s[i] != '\0' && std::strchr("#%-", s[i]) && s[i + 1] == '}' && s[i + 2] == '\n') {
      out.put(in, i + 1);
      i += 2;  // skip the newline
    }
  }
  return out;
}

// Returns the end of a {% generation %} / {% endgeneration %} tag starting at
// `p` (at "{%"), or 0; sets whether it carries - on either side.
size_t generation_tag_end(const std::string& s, size_t p, bool* lstrip, bool* rstrip) {
  size_t q = p + 2;
  *lstrip = q < s.size() && s[q] == '-';
  if (*lstrip) ++q;
  while (size_t n = js_space_len(s, q)) q += n;
  if (s.compare(q, 13, "endgeneration") == 0) {
    q += 13;
  } else if (s.compare(q, 10, "generation") == 0) {
    q += 10;
  } else {
    return 0;
  }
  while (size_t n = js_space_len(s, q)) q += n;
  *rstrip = q < s.size() && s[q] == '-';
  if (*rstrip) ++q;
  if (s.compare(q, 2, "%}") != 0) return 0;
  return q + 2;
}

Text remove_generation_tags(const Text& in) {
  Text out;
  const std::string& s = in.s;
  size_t copied = 0;  // everything before this is in `out`
  for (size_t p = 0; p + 1 < s.size(); ++p) {
    if (s[p] != '{' || s[p + 1] != '%') continue;
    bool lstrip, rstrip;
    const size_t end = generation_tag_end(s, p, &lstrip, &rstrip);
    if (!end) continue;
    size_t before = p;
    while (before > copied)
      if (size_t n = js_space_len_before(s, before); n && before - n >= copied) {
        before -= n;
      } else {
        break;
      }
    size_t after = end;
    while (size_t n = js_space_len(s, after)) after += n;
    out.put_range(in, copied, before);
    if (!lstrip) out.put_range(in, before, p);
    if (!rstrip) out.put_range(in, end, after);
    copied = after;
    p = after - 1;
  }
  out.put_range(in, copied, s.size());
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

class Lexer {
 public:
  explicit Lexer(const std::string& src) : s_(src) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) step();
    push(Tok::Eof, "", static_cast<uint32_t>(s_.size()));
    return std::move(tokens_);
  }

 private:
  char at(size_t i) const { return i < s_.size() ? s_[i] : '\0'; }
  bool starts(const char* t) const { return s_.compare(pos_, std::strlen(t), t) == 0; }
  Tok last() const { return tokens_.empty() ? Tok::Eof : tokens_.back().type; }
  void push(Tok t, std::string v, uint32_t p) { tokens_.push_back(Token{t, std::move(v), p}); }
  [[noreturn]] void error(std::string msg) const { fail(std::move(msg), static_cast<uint32_t>(pos_)); }

  void step() {
    const Tok prev = last();
    if (tokens_.empty() || prev == Tok::CloseStmt || prev == Tok::CloseExpr || prev == Tok::Comment) {
      const size_t start = pos_;
      while (pos_ < s_.size() && !(s_[pos_] == '{' && (at(pos_ + 1) == '%' || at(pos_ + 1) == '{' || at(pos_ + 1) == '#')))
        ++pos_;
      if (pos_ > start) {
        push(Tok::Text, s_.substr(start, pos_ - start), static_cast<uint32_t>(start));
        return;
      }
    }
    if (at(pos_) == '{' && at(pos_ + 1) == '#') return comment();
    if (starts("{%-")) {
      strip_trailing_whitespace();
      push(Tok::OpenStmt, "{%", static_cast<uint32_t>(pos_));
      pos_ += 3;
      return;
    }
    if (starts("{{-")) {
      strip_trailing_whitespace();
      push(Tok::OpenExpr, "{{", static_cast<uint32_t>(pos_));
      curly_ = 0;
      pos_ += 3;
      return;
    }
    // Whitespace inside a tag is skipped, but it may not run to the end.
    while (size_t n = js_space_len(s_, pos_)) {
      pos_ += n;
      if (pos_ >= s_.size()) error("unexpected end of template inside a tag");
    }
    if (starts("-%}")) {
      push(Tok::CloseStmt, "%}", static_cast<uint32_t>(pos_));
      pos_ += 3;
      skip_leading_whitespace();
      return;
    }
    if (starts("-}}")) {
      push(Tok::CloseExpr, "}}", static_cast<uint32_t>(pos_));
      pos_ += 3;
      skip_leading_whitespace();
      return;
    }
    const char c = s_[pos_];
    if (c == '-' || c == '+') {
      if (prev == Tok::Text || tokens_.empty()) error(std::string("unexpected character '") + c + "'");
      const bool binary = prev == Tok::Ident || prev == Tok::Number || prev == Tok::String ||
                          prev == Tok::RParen || prev == Tok::RBracket;
      if (!binary) {
        const uint32_t p = static_cast<uint32_t>(pos_++);
        std::string num = digits();
        if (!num.empty() && at(pos_) == '.' && is_digit(at(pos_ + 1))) {
          ++pos_;
          num += "." + digits();
        }
        push(num.empty() ? Tok::Unary : Tok::Number, std::string(1, c) + num, p);
        return;
      }
    }
    static const struct {
      const char* seq;
      Tok type;
    } kTable[] = {
        {"{%", Tok::OpenStmt},   {"%}", Tok::CloseStmt},  {"{{", Tok::OpenExpr},   {"}}", Tok::CloseExpr},
        {"(", Tok::LParen},      {")", Tok::RParen},      {"{", Tok::LBrace},      {"}", Tok::RBrace},
        {"[", Tok::LBracket},    {"]", Tok::RBracket},    {",", Tok::Comma},       {".", Tok::Dot},
        {":", Tok::Colon},       {"|", Tok::Pipe},        {"<=", Tok::Comparison}, {">=", Tok::Comparison},
        {"==", Tok::Comparison}, {"!=", Tok::Comparison}, {"<", Tok::Comparison},  {">", Tok::Comparison},
        {"+", Tok::Additive},    {"-", Tok::Additive},    {"~", Tok::Additive},    {"**", Tok::Power},
        {"*", Tok::Multiplicative}, {"//", Tok::Multiplicative}, {"/", Tok::Multiplicative},
        {"%", Tok::Multiplicative}, {"=", Tok::Equals},
    };
    for (const auto& [seq, type] : kTable) {
      // Inside a dict literal, "}}" closes the dict, not the expression.
      if (type == Tok::CloseExpr && curly_ > 0) continue;
      if (!starts(seq)) continue;
      push(type, seq, static_cast<uint32_t>(pos_));
      if (type == Tok::OpenExpr) curly_ = 0;
      if (type == Tok::LBrace) ++curly_;
      if (type == Tok::RBrace) --curly_;
      pos_ += std::strlen(seq);
      return;
    }
    if (c == '\'' || c == '"') return string_literal(c);
    if (is_digit(c)) {
      const uint32_t p = static_cast<uint32_t>(pos_);
      std::string num = digits();
      if (prev != Tok::Dot && at(pos_) == '.' && is_digit(at(pos_ + 1))) {
        ++pos_;
        num += "." + digits();
      }
      push(Tok::Number, std::move(num), p);
      return;
    }
    if (is_word(c)) {
      const uint32_t p = static_cast<uint32_t>(pos_);
      std::string word;
      while (is_word(at(pos_))) {
        word += s_[pos_++];
        if (pos_ >= s_.size()) error("unexpected end of template inside a tag");
      }
      push(Tok::Ident, std::move(word), p);
      return;
    }
    const auto uc = static_cast<unsigned char>(c);
    if (uc < 0x20 || uc >= 0x7F) error("unexpected byte 0x" + std::string(1, "0123456789abcdef"[uc >> 4]) + "0123456789abcdef"[uc & 15] + " inside a tag");
    error(std::string("unexpected character '") + c + "'");
  }

  std::string digits() {
    std::string d;
    while (is_digit(at(pos_))) {
      d += s_[pos_++];
      if (pos_ >= s_.size()) error("unexpected end of template inside a tag");
    }
    return d;
  }

  void comment() {
    const size_t start = pos_;
    pos_ += 2;
    const bool strip_before = at(pos_) == '-';
    if (strip_before) ++pos_;
    const size_t body = pos_;
    while (!(at(pos_) == '#' && at(pos_ + 1) == '}')) {
      if (pos_ + 2 >= s_.size()) fail("unterminated comment: '{#' without '#}'", static_cast<uint32_t>(start));
      ++pos_;
    }
    std::string text = s_.substr(body, pos_ - body);
    const bool strip_after = !text.empty() && text.back() == '-';
    if (strip_before) strip_trailing_whitespace();
    push(Tok::Comment, std::move(text), static_cast<uint32_t>(start));
    pos_ += 2;
    if (strip_after) skip_leading_whitespace();
  }

  void string_literal(char quote) {
    const uint32_t start = static_cast<uint32_t>(pos_);
    ++pos_;
    std::string out;
    uint32_t pending_high = 0;  // a \uD8xx waiting for its low half
    auto flush_high = [&] {
      if (pending_high) out += "\xEF\xBF\xBD";  // a lone surrogate prints as U+FFFD
      pending_high = 0;
    };
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string literal", start);
      const char c = s_[pos_];
      if (c == quote) break;
      if (c != '\\') {
        flush_high();
        out += c;
        ++pos_;
        if (pos_ >= s_.size()) fail("unterminated string literal", start);
        continue;
      }
      ++pos_;
      if (pos_ >= s_.size()) fail("unterminated string literal", start);
      const char e = s_[pos_++];
      if (e == 'x' || e == 'u') {
        const size_t len = e == 'x' ? 2 : 4;
        uint32_t unit = 0;
        for (size_t k = 0; k < len; ++k) {
          const char h = at(pos_ + k);
          const int d = is_digit(h) ? h - '0' : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (h | 0x20) - 'a' + 10 : -1;
          if (d < 0) error(std::string("invalid \\") + e + " escape in a string literal");
          unit = unit * 16 + static_cast<uint32_t>(d);
        }
        pos_ += len;
        if (unit >= 0xDC00 && unit <= 0xDFFF && pending_high) {
          unicode::append_utf8(out, 0x10000 + ((pending_high - 0xD800) << 10) + (unit - 0xDC00));
          pending_high = 0;
        } else {
          flush_high();
          if (unit >= 0xD800 && unit <= 0xDBFF) {
            pending_high = unit;
          } else if (unit >= 0xDC00 && unit <= 0xDFFF) {
            out += "\xEF\xBF\xBD";
          } else {
            unicode::append_utf8(out, unit);
          }
        }
        continue;
      }
      flush_high();
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        default: error(std::string("unknown escape '\\") + e + "' in a string literal");
      }
    }
    flush_high();
    ++pos_;  // the closing quote
    push(Tok::String, std::move(out), start);
  }

  void strip_trailing_whitespace() {
    if (tokens_.empty() || tokens_.back().type != Tok::Text) return;
    std::string& v = tokens_.back().value;
    v.resize(js_trim_end(v).size());
    if (v.empty()) tokens_.pop_back();
  }

  void skip_leading_whitespace() {
    while (size_t n = js_space_len(s_, pos_)) pos_ += n;
  }

  const std::string& s_;
  size_t pos_ = 0;
  int curly_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

Source preprocess(std::string_view template_source) {
  Text t;
  t.s.assign(template_source);
  t.o.resize(t.s.size());
  for (size_t i = 0; i < t.o.size(); ++i) t.o[i] = static_cast<uint32_t>(i);
  if (!t.s.empty() && t.s.back() == '\n') {
    t.s.pop_back();
    t.o.pop_back();
  }
  t = remove_generation_tags(trim_blocks(lstrip_blocks(t)));
  Source src;
  src.original.assign(template_source);
  src.text = std::move(t.s);
  src.origin = std::move(t.o);
  src.origin.push_back(static_cast<uint32_t>(template_source.size()));
  return src;
}

std::vector<Token> tokenize(const Source& src) { return Lexer(src.text).run(); }

}  // namespace th::jinja
