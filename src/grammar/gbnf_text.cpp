#include "grammar/gbnf_text.h"

#include <cstdio>

namespace th::grammar {

namespace {

// Letters, digits and a few safe marks as they are; everything else escaped, which the
// parser reads back in literals and classes alike.
void append_char(uint32_t cp, std::string& out) {
  const bool plain = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') || cp == ' ' ||
                     cp == '_' || cp == ',' || cp == ':' || cp == '.' || cp == '{' || cp == '}';
  if (plain) {
    out += static_cast<char>(cp);
    return;
  }
  char buf[16];
  if (cp < 0x80) std::snprintf(buf, sizeof buf, "\\x%02X", cp);
  else if (cp <= 0xFFFF) std::snprintf(buf, sizeof buf, "\\u%04X", cp);
  else std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  out += buf;
}

}  // namespace

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (size_t i = 0; i < bytes.size();) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : 4;
    if (n == 1 || i + static_cast<size_t>(n) > bytes.size()) {
      append_char(c, out);
      ++i;
      continue;
    }
    uint32_t cp = c & (0x7F >> n);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(bytes[i + static_cast<size_t>(k)]) & 0x3F);
    append_char(cp, out);
    i += static_cast<size_t>(n);
  }
  return out + "\"";
}

std::string gbnf_class(const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
  std::string out = "[";
  for (auto [lo, hi] : ranges) {
    append_char(lo, out);
    if (hi != lo) {
      out += '-';
      append_char(hi, out);
    }
  }
  return out + "]";
}

}  // namespace th::grammar
