#include "grammar/regex_grammar.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "grammar/gbnf_text.h"

namespace th::grammar {

namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;
constexpr uint32_t kMaxCodePoint = 0x10FFFF;

Ranges complement(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges c;
  uint32_t next = 0;
  for (auto [a, b] : r) {
    if (a > next) c.push_back({next, a - 1});
    next = std::max(next, b + 1);
  }
  if (next <= kMaxCodePoint) c.push_back({next, kMaxCodePoint});
  return c;
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};

class RegexCompiler {
 public:
  RegexCompiler(std::string_view p, const RegexOptions& o) : s_(p), o_(o) {}

  Result<std::string> compile(bool* anchored_start, bool* anchored_end) {
    bool start = false, end = false;
    if (!s_.empty() && s_[0] == '^') start = true, s_.remove_prefix(1);
    if (!s_.empty() && s_.back() == '$' && (s_.size() < 2 || s_[s_.size() - 2] != '\\')) end = true, s_.remove_suffix(1);
    if (anchored_start) *anchored_start = start;
    if (anchored_end) *anchored_end = end;
    TH_ASSIGN_OR_RETURN(std::string e, alternation(0));
    if (i_ < s_.size()) return fail(cat("unexpected '", s_[i_], "'"));
    return e;
  }

 private:
  Status fail(const std::string& why) const { return Status::errorf("regex at offset ", i_, ": ", why); }
  bool at(char c) const { return i_ < s_.size() && s_[i_] == c; }

  // Each of these leaves in nullable_ whether what it parsed can match nothing.
  Result<std::string> alternation(int depth) {
    if (depth > o_.max_depth) return fail(cat("groups nest deeper than ", o_.max_depth));
    TH_ASSIGN_OR_RETURN(std::string out, sequence(depth));
    bool any = nullable_;
    out = "(" + out;
    while (at('|')) {
      ++i_;
      TH_ASSIGN_OR_RETURN(std::string next, sequence(depth));
      any = any || nullable_;
      out += " | " + next;
    }
    nullable_ = any;
    return out + ")";
  }

  Result<std::string> sequence(int depth) {
    std::string out = "\"\"";
    bool all = true;
    while (i_ < s_.size() && !at('|') && !at(')')) {
      TH_ASSIGN_OR_RETURN(std::string a, atom(depth));
      const bool atom_nullable = nullable_;
      TH_ASSIGN_OR_RETURN(std::string q, quantifier());
      const bool unbounded = q == "*" || q == "+" || (!q.empty() && q.back() == '}' && q[q.size() - 2] == ',');
      // The grammar repeats by right recursion, which a repeated item that matches nothing
      // would turn into left recursion: (a?)* is a* written otherwise, so ask for that.
      if (unbounded && atom_nullable) return fail("an unbounded repetition of something that can match nothing (write (a?)* as a*)");
      all = all && (atom_nullable || q == "*" || q == "?" || q.rfind("{0", 0) == 0);
      out += " (" + a + ")" + q;
    }
    nullable_ = all;
    return out;
  }

  Result<std::string> quantifier() {
    std::string q;
    if (at('*') || at('+') || at('?')) {
      q = s_[i_++];
    } else if (at('{')) {
      const size_t close = s_.find('}', i_);
      if (close == std::string_view::npos) return fail("'{' without '}'");
      const std::string_view body = s_.substr(i_ + 1, close - i_ - 1);
      const size_t comma = body.find(',');
      if (body.empty() || body.find_first_not_of("0123456789,") != std::string_view::npos || body[0] == ',' ||
          (comma != std::string_view::npos && body.find(',', comma + 1) != std::string_view::npos))
        return fail("a repetition must be {m}, {m,} or {m,n}");
      q = "{" + std::string(body) + "}";
      i_ = close + 1;
    } else {
      return q;
    }
    if (at('?')) ++i_;  // lazy: the same strings match
    if (at('*') || at('+') || at('?') || at('{')) return fail("a repetition of a repetition (possessive or nested) is not supported");
    return q;
  }

  Result<std::string> atom(int depth) {
    nullable_ = false;  // a character or a class; a group sets it below
    const char c = s_[i_];
    if (c == '(') {
      ++i_;
      if (at('?')) {
        if (s_.substr(i_, 2) == "?:") i_ += 2;
        else if (s_.substr(i_, 2) == "?<" && s_.substr(i_, 3) != "?<=" && s_.substr(i_, 3) != "?<!") {
          const size_t close = s_.find('>', i_);
          if (close == std::string_view::npos) return fail("a named group's name is not closed with '>'");
          i_ = close + 1;
        } else {
          return fail("lookaround and other (? groups are not supported");
        }
      }
      TH_ASSIGN_OR_RETURN(std::string inner, alternation(depth + 1));
      if (!at(')')) return fail("'(' without ')'");
      ++i_;
      return inner;
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return set(complement({{'\n', '\n'}}));
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') return fail(cat("'", c, "' has nothing to repeat"));
    if (c == '^' || c == '$') return fail("anchors are supported only at the start and the end");
    if (c == '\\') {
      TH_ASSIGN_OR_RETURN(Ranges r, escape(false));
      return set(r);
    }
    TH_ASSIGN_OR_RETURN(uint32_t cp, utf8_char());
    return set({{cp, cp}});
  }

  Result<uint32_t> utf8_char() {
    const auto c = static_cast<unsigned char>(s_[i_]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i_ + static_cast<size_t>(n) > s_.size()) return fail("invalid UTF-8");
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto d = static_cast<unsigned char>(s_[i_ + static_cast<size_t>(k)]);
      if ((d & 0xC0) != 0x80) return fail("invalid UTF-8");
      cp = (cp << 6) | (d & 0x3F);
    }
    if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return fail("invalid UTF-8");
    i_ += static_cast<size_t>(n);
    return cp;
  }

  // After a backslash: a class escape, or one character.
  Result<Ranges> escape(bool in_class) {
    ++i_;
    if (i_ >= s_.size()) return fail("a pattern cannot end with '\\'");
    const char e = s_[i_++];
    switch (e) {
      case 'd': return kDigit;
      case 'D': return complement(kDigit);
      case 'w': return kWord;
      case 'W': return complement(kWord);
      case 's': return kSpace;
      case 'S': return complement(kSpace);
      case 'n': return Ranges{{'\n', '\n'}};
      case 't': return Ranges{{'\t', '\t'}};
      case 'r': return Ranges{{'\r', '\r'}};
      case 'f': return Ranges{{'\f', '\f'}};
      case 'v': return Ranges{{'\v', '\v'}};
      case 'u': case 'x': {
        const size_t digits = e == 'u' ? 4 : 2;
        uint32_t v = 0;
        for (size_t k = 0; k < digits; ++k, ++i_) {
          const char h = i_ < s_.size() ? s_[i_] : '\0';
          const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (d < 0) return fail(cat("\\", e, " needs ", digits, " hex digits"));
          v = v * 16 + static_cast<uint32_t>(d);
        }
        return Ranges{{v, v}};
      }
      case 'b': if (in_class) return Ranges{{'\b', '\b'}}; [[fallthrough]];
      default:
        if ((e >= '0' && e <= '9') || e == 'b' || e == 'B' || e == 'k' || e == 'p' || e == 'P' || e == 'A' || e == 'z' || e == 'Z')
          return fail(cat("\\", e, " (back references, boundaries, properties) is not supported"));
        return Ranges{{static_cast<unsigned char>(e), static_cast<unsigned char>(e)}};
    }
  }

  Result<std::string> char_class() {
    ++i_;
    const bool negated = at('^');
    if (negated) ++i_;
    Ranges r;
    bool first = true;
    while (i_ < s_.size() && (!at(']') || first)) {
      first = false;
      Ranges item;
      if (at('\\')) {
        TH_ASSIGN_OR_RETURN(item, escape(true));
      } else {
        TH_ASSIGN_OR_RETURN(uint32_t cp, utf8_char());
        item = {{cp, cp}};
      }
      if (item.size() == 1 && item[0].first == item[0].second && at('-') && i_ + 1 < s_.size() && s_[i_ + 1] != ']') {
        ++i_;
        Ranges hi;
        if (at('\\')) {
          TH_ASSIGN_OR_RETURN(hi, escape(true));
        } else {
          TH_ASSIGN_OR_RETURN(uint32_t cp, utf8_char());
          hi = {{cp, cp}};
        }
        if (hi.size() != 1 || hi[0].first != hi[0].second || hi[0].first < item[0].first)
          return fail("a bad range in a character class");
        item[0].second = hi[0].first;
      }
      r.insert(r.end(), item.begin(), item.end());
    }
    if (!at(']')) return fail("'[' without ']'");
    ++i_;
    return set(negated ? complement(r) : r);
  }

  // A set of code points as GBNF; in a JSON string, `"` and `\` escaped and control
  // characters left out (a subset of what the pattern allows: always valid JSON).
  std::string set(Ranges r) {
    if (!o_.json_string) return gbnf_class(r);
    bool quote = false, backslash = false;
    Ranges kept;
    for (auto [a, b] : r) {
      quote = quote || (a <= '"' && '"' <= b);
      backslash = backslash || (a <= '\\' && '\\' <= b);
      for (auto [x, y] : complement({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}))
        if (std::max(a, x) <= std::min(b, y)) kept.push_back({std::max(a, x), std::min(b, y)});
    }
    std::string out = kept.empty() ? std::string() : gbnf_class(kept);
    auto alt = [&out](const std::string& s) { out += (out.empty() ? "" : " | ") + s; };
    if (quote) alt(gbnf_literal("\\\""));
    if (backslash) alt(gbnf_literal("\\\\"));
    return out.empty() ? "[^\\x00-\\U0010FFFF]" : out;  // nothing left: matches nothing
  }

  std::string_view s_;
  RegexOptions o_;
  size_t i_ = 0;
  bool nullable_ = false;
};

}  // namespace

Result<std::string> regex_to_gbnf(std::string_view pattern, const RegexOptions& options, bool* anchored_start,
                                  bool* anchored_end) {
  Result<std::string> r = RegexCompiler(pattern, options).compile(anchored_start, anchored_end);
  if (!r.ok()) return printable(r.status());
  return r;
}

Result<std::string> choice_to_gbnf(const std::vector<std::string>& choices) {
  if (choices.empty()) return Status::error("there must be at least one choice");
  std::string out = "root ::= ";
  for (size_t k = 0; k < choices.size(); ++k) out += (k ? " | " : "") + gbnf_literal(choices[k]);
  return out + "\n";
}

}  // namespace th::grammar
