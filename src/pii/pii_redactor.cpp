#include "pii/pii_redactor.h"

#include <algorithm>

namespace th::pii {
namespace {

bool is_token_byte(char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

}  // namespace

Redactor::Redactor(RedactPolicy policy) : policy_(policy) {}

std::string Redactor::replacement(PiiKind kind, std::string_view value) {
  const std::string_view name = pii_kind_name(kind);
  if (policy_.mode == RedactMode::kMask) return "[" + std::string(name) + "]";
  // Keyed by the exact spelling, so restore() gives back exactly what was redacted.
  std::string key(1, static_cast<char>('0' + static_cast<int>(kind)));
  key.append(value);
  auto it = token_of_.find(key);
  if (it != token_of_.end()) return it->second;
  const uint32_t n = ++issued_[static_cast<int>(kind)];
  std::string token = "<" + std::string(name) + "_" + std::to_string(n) + ">";
  value_of_.emplace(token, std::string(value));
  token_of_.emplace(std::move(key), token);
  return token;
}

void Redactor::apply(std::string_view text, size_t from, size_t to, const std::vector<PiiSpan>& spans,
                     std::string& out) {
  size_t at = from;
  for (const PiiSpan& s : spans) {
    out.append(text.substr(at, s.begin - at));
    out += replacement(s.kind, text.substr(s.begin, s.end - s.begin));
    at = s.end;
  }
  out.append(text.substr(at, to - at));
}

std::string Redactor::redact(std::string_view text) {
  const PiiScan scan = scan_pii(text, 0, true, policy_.kinds);
  std::string out;
  out.reserve(text.size());
  apply(text, 0, text.size(), scan.spans, out);
  return out;
}

std::string Redactor::restore(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t lt = text.find('<', i);
    if (lt == std::string_view::npos) break;
    out.append(text.substr(i, lt - i));
    size_t j = lt + 1;
    while (j < text.size() && j - lt < kMaxPiiTokenLength && is_token_byte(text[j])) ++j;
    if (j < text.size() && text[j] == '>' && !value_of_.empty()) {
      auto it = value_of_.find(std::string(text.substr(lt, j + 1 - lt)));
      if (it != value_of_.end()) {
        out += it->second;
        i = j + 1;
        continue;
      }
    }
    out += '<';
    i = lt + 1;
  }
  out.append(text.substr(std::min(i, text.size())));
  return out;
}

std::string StreamingRedactor::push(std::string_view piece) {
  buffer_.append(piece);
  const PiiScan scan = scan_pii(buffer_, context_, false, redactor_.policy().kinds);
  std::string out;
  redactor_.apply(buffer_, context_, scan.decided, scan.spans, out);
  // Keep the last kPiiLookBehind released bytes: the left boundary rules read them.
  const size_t keep_from = scan.decided - std::min(scan.decided, kPiiLookBehind);
  buffer_.erase(0, keep_from);
  context_ = scan.decided - keep_from;
  return out;
}

std::string StreamingRedactor::flush() {
  const PiiScan scan = scan_pii(buffer_, context_, true, redactor_.policy().kinds);
  std::string out;
  redactor_.apply(buffer_, context_, buffer_.size(), scan.spans, out);
  buffer_.clear();
  context_ = 0;
  return out;
}

std::string StreamingRestorer::push(std::string_view piece) {
  held_.append(piece);
  // Only the last '<' can still begin a token: any earlier one has that '<' in its tail.
  size_t cut = held_.size();
  const size_t lt = held_.rfind('<');
  if (lt != std::string::npos && held_.size() - lt < kMaxPiiTokenLength &&
      std::all_of(held_.begin() + static_cast<ptrdiff_t>(lt) + 1, held_.end(), is_token_byte))
    cut = lt;
  std::string out = redactor_.restore(std::string_view(held_).substr(0, cut));
  held_.erase(0, cut);
  return out;
}

std::string StreamingRestorer::flush() {
  std::string out = redactor_.restore(held_);
  held_.clear();
  return out;
}

std::string redact_for_log(std::string_view line) {
  const std::vector<PiiSpan> spans = find_pii(line);
  if (spans.empty()) return std::string(line);
  std::string out;
  out.reserve(line.size());
  size_t at = 0;
  for (const PiiSpan& s : spans) {
    out.append(line.substr(at, s.begin - at));
    out += '[';
    out += pii_kind_name(s.kind);
    out += ']';
    at = s.end;
  }
  out.append(line.substr(at));
  return out;
}

}  // namespace th::pii
