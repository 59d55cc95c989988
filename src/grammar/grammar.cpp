#include "grammar/grammar.h"

#include <algorithm>
#include <optional>

namespace th::grammar {

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// One UTF-8 byte range per position of an encoded character.
using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;

int utf8_length(uint32_t cp) { return cp <= 0x7F ? 1 : cp <= 0x7FF ? 2 : cp <= 0xFFFF ? 3 : 4; }

std::string utf8(uint32_t cp) {
  std::string s;
  append_utf8(cp, s);
  return s;
}

// The code points lo..hi (surrogates left out) as sequences of byte ranges, each the
// cross product of its ranges (Russ Cox's split, as in RE2 and Rust's regex-syntax):
// split where the encoded length changes, then wherever a continuation byte would
// not run over its whole 0x80..0xBF.
std::vector<ByteRanges> utf8_ranges(uint32_t lo, uint32_t hi) {
  std::vector<ByteRanges> out;
  std::vector<std::pair<uint32_t, uint32_t>> work{{lo, hi}};
  while (!work.empty()) {
    auto [a, b] = work.back();
    work.pop_back();
    if (a > b) continue;
    if (a <= 0xDFFF && b >= 0xD800) {
      if (a < 0xD800) work.push_back({a, 0xD7FF});
      if (b > 0xDFFF) work.push_back({0xE000, b});
      continue;
    }
    bool split = false;
    for (uint32_t m : {0x7Fu, 0x7FFu, 0xFFFFu}) {
      if (a <= m && b > m) {
        work.push_back({a, m});
        work.push_back({m + 1, b});
        split = true;
        break;
      }
    }
    for (int i = 1; !split && i < utf8_length(a); ++i) {
      const uint32_t m = (1u << (6 * i)) - 1;
      if ((a & ~m) == (b & ~m)) continue;
      if ((a & m) != 0) {
        work.push_back({a, a | m});
        work.push_back({(a | m) + 1, b});
        split = true;
      } else if ((b & m) != m) {
        work.push_back({a, (b & ~m) - 1});
        work.push_back({b & ~m, b});
        split = true;
      }
    }
    if (split) continue;
    const std::string ea = utf8(a), eb = utf8(b);
    ByteRanges r;
    for (size_t i = 0; i < ea.size(); ++i) r.push_back({static_cast<uint8_t>(ea[i]), static_cast<uint8_t>(eb[i])});
    out.push_back(std::move(r));
  }
  return out;
}

// Sorted, merged, clamped to the code points; complemented when negated.
std::vector<std::pair<uint32_t, uint32_t>> normalize(std::vector<std::pair<uint32_t, uint32_t>> r, bool negated) {
  std::sort(r.begin(), r.end());
  std::vector<std::pair<uint32_t, uint32_t>> m;
  for (auto [a, b] : r) {
    b = std::min(b, kMaxCodePoint);
    if (a > b) continue;
    if (!m.empty() && a <= m.back().second + 1) m.back().second = std::max(m.back().second, b);
    else m.push_back({a, b});
  }
  if (!negated) return m;
  std::vector<std::pair<uint32_t, uint32_t>> c;
  uint32_t next = 0;
  for (auto [a, b] : m) {
    if (a > next) c.push_back({next, a - 1});
    next = b + 1;
  }
  if (next <= kMaxCodePoint) c.push_back({next, kMaxCodePoint});
  return c;
}

}  // namespace

Status printable(const Status& error) {
  if (error.ok()) return error;
  const std::string& m = error.message();
  std::string out;
  for (size_t i = 0; i < m.size();) {
    const auto c = static_cast<unsigned char>(m[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= m.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(m[i + k]) & 0xC0) == 0x80;
    if (!ok || c < 0x20 || c == 0x7F) {
      out += '?';
      ++i;
      continue;
    }
    out.append(m, i, n);
    i += n;
  }
  return Status::error(std::move(out));
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp <= 0x7F) {
    out += static_cast<char>(cp);
  } else if (cp <= 0x7FF) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp <= 0xFFFF) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

Status GrammarBuilder::count(size_t n_elements) {
  n_elements_ += n_elements;
  if (n_elements_ > limits_.max_elements)
    return Status::errorf("the grammar is too large (over ", limits_.max_elements, " elements once expanded)");
  return ok_status();
}

Result<uint32_t> GrammarBuilder::rule(std::string_view name) {
  auto it = by_name_.find(std::string(name));
  if (it != by_name_.end()) return it->second;
  if (rules_.size() >= limits_.max_rules)
    return Status::errorf("the grammar is too large (over ", limits_.max_rules, " rules once expanded)");
  const auto id = static_cast<uint32_t>(rules_.size());
  rules_.emplace_back();
  defined_.push_back(false);
  g_.names.emplace_back(name);
  by_name_.emplace(std::string(name), id);
  return id;
}

Result<uint32_t> GrammarBuilder::fresh_rule(std::string_view base) {
  // Generated names hold a '#', which GBNF names cannot: they never meet a user's rule.
  return rule(cat(base, "#", n_fresh_++));
}

Status GrammarBuilder::define(uint32_t rule, std::vector<Alternative> alternatives) {
  if (defined_[rule]) return Status::errorf("rule '", g_.names[rule], "' is defined twice");
  size_t n = 0;
  for (const Alternative& a : alternatives) n += a.size() + 1;
  TH_RETURN_IF_ERROR(count(n));
  rules_[rule] = std::move(alternatives);
  defined_[rule] = true;
  return ok_status();
}

Element GrammarBuilder::bytes(const ByteSet& s) {
  for (size_t i = 0; i < g_.sets.size(); ++i)
    if (g_.sets[i] == s) return {Element::Kind::Bytes, static_cast<uint32_t>(i)};
  g_.sets.push_back(s);
  return {Element::Kind::Bytes, static_cast<uint32_t>(g_.sets.size() - 1)};
}

Status GrammarBuilder::char_class(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated, Alternative& seq) {
  ByteSet ascii;
  std::vector<Alternative> multi;
  for (auto [a, b] : normalize(std::move(ranges), negated)) {
    for (const ByteRanges& r : utf8_ranges(a, b)) {
      if (r.size() == 1) {
        ascii.add_range(r[0].first, r[0].second);
        continue;
      }
      Alternative alt;
      for (auto [x, y] : r) {
        ByteSet s;
        s.add_range(x, y);
        alt.push_back(bytes(s));
      }
      multi.push_back(std::move(alt));
    }
  }
  if (multi.empty()) {
    seq.push_back(bytes(ascii));  // possibly empty: a class no character matches
    return count(1);
  }
  if (ascii != ByteSet{}) multi.insert(multi.begin(), Alternative{bytes(ascii)});
  TH_ASSIGN_OR_RETURN(Element e, group(std::move(multi)));
  seq.push_back(e);
  return count(1);
}

void GrammarBuilder::literal(std::string_view text, Alternative& seq) {
  for (char c : text) {
    ByteSet s;
    s.add(static_cast<uint8_t>(c));
    seq.push_back(bytes(s));
  }
  n_elements_ += text.size();  // checked by the next define()
}

Status GrammarBuilder::repeat(Element e, int min, int max, Alternative& seq) {
  if (min < 0 || min > limits_.max_repeat || max > limits_.max_repeat || (max >= 0 && max < min))
    return Status::errorf("repetition {", min, ",", max < 0 ? std::string() : std::to_string(max),
                          "} is out of range (0 <= m <= n <= ", limits_.max_repeat, ")");
  TH_RETURN_IF_ERROR(count(static_cast<size_t>(min) + 1));
  for (int i = 0; i < min; ++i) seq.push_back(e);
  if (max < 0) {  // R ::= e R | "": right recursion, which the matcher runs in constant depth
    TH_ASSIGN_OR_RETURN(uint32_t r, fresh_rule("star"));
    TH_RETURN_IF_ERROR(define(r, {{e, ref(r)}, {}}));
    seq.push_back(ref(r));
    return ok_status();
  }
  // (e (e (e)?)?)?: n - m optional copies, nested so that each parse is unique.
  std::optional<Element> inner;
  for (int i = 0; i < max - min; ++i) {
    TH_ASSIGN_OR_RETURN(uint32_t r, fresh_rule("opt"));
    Alternative a{e};
    if (inner) a.push_back(*inner);
    TH_RETURN_IF_ERROR(define(r, {std::move(a), {}}));
    inner = ref(r);
  }
  if (inner) seq.push_back(*inner);
  return ok_status();
}

Result<Element> GrammarBuilder::group(std::vector<Alternative> alternatives) {
  if (alternatives.size() == 1 && alternatives[0].size() == 1) return alternatives[0][0];
  TH_ASSIGN_OR_RETURN(uint32_t r, fresh_rule("group"));
  TH_RETURN_IF_ERROR(define(r, std::move(alternatives)));
  return ref(r);
}

Result<Grammar> GrammarBuilder::finish(std::string_view root_name) {
  auto root = by_name_.find(std::string(root_name));
  if (root == by_name_.end() || !defined_[root->second]) return Status::errorf("there is no rule '", root_name, "'");
  for (size_t r = 0; r < rules_.size(); ++r)
    if (!defined_[r]) return Status::errorf("rule '", g_.names[r], "' is used but not defined");
  g_.root = root->second;
  g_.alternatives.assign(rules_.size(), {});
  for (size_t r = 0; r < rules_.size(); ++r) {
    for (Alternative& a : rules_[r]) {
      g_.alternatives[r].push_back(static_cast<uint32_t>(g_.elements.size()));
      g_.elements.insert(g_.elements.end(), a.begin(), a.end());
      g_.elements.push_back({});
    }
  }
  rules_.clear();
  TH_RETURN_IF_ERROR(check_left_recursion(g_));
  return std::move(g_);
}

Status GrammarBuilder::check_left_recursion(const Grammar& g) const {
  const size_t n = g.alternatives.size();
  // Nullable rules (those that can match nothing), to a fixed point.
  std::vector<bool> nullable(n, false);
  auto nullable_until = [&](uint32_t start) {  // the first element that cannot match nothing
    uint32_t p = start;
    while (g.elements[p].kind == Element::Kind::Ref && nullable[g.elements[p].value]) ++p;
    return p;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (uint32_t a : g.alternatives[r])
        if (g.elements[nullable_until(a)].kind == Element::Kind::End) nullable[r] = changed = true;
    }
  }
  // Rule r "left-calls" s when s can come first in r, after nullable elements only;
  // a cycle of left-calls is left recursion. Iterative depth-first search, 0/1/2 colours.
  std::vector<uint8_t> colour(n, 0);
  std::vector<std::pair<uint32_t, std::vector<uint32_t>>> stack;
  auto callees = [&](uint32_t r) {
    std::vector<uint32_t> out;
    for (uint32_t a : g.alternatives[r]) {
      for (uint32_t p = a; g.elements[p].kind == Element::Kind::Ref; ++p) {
        out.push_back(g.elements[p].value);
        if (!nullable[g.elements[p].value]) break;
      }
    }
    return out;
  };
  for (uint32_t start = 0; start < n; ++start) {
    if (colour[start]) continue;
    colour[start] = 1;
    stack.push_back({start, callees(start)});
    while (!stack.empty()) {
      auto& [r, todo] = stack.back();
      if (todo.empty()) {
        colour[r] = 2;
        stack.pop_back();
        continue;
      }
      const uint32_t s = todo.back();
      todo.pop_back();
      if (colour[s] == 1 && g.names[s].rfind("star#", 0) == 0)  // R ::= e R | "" with e nullable
        return Status::error("an unbounded repetition of something that can match nothing (write (x?)* as x*)");
      if (colour[s] == 1) return Status::errorf("rule '", g.names[s], "' is left-recursive (the matcher expands rules top-down)");
      if (colour[s] == 0) {
        colour[s] = 1;
        stack.push_back({s, callees(s)});
      }
    }
  }
  return ok_status();
}

}  // namespace th::grammar
