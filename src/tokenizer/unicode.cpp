#include "tokenizer/unicode.h"

#include <array>

namespace th::unicode {

namespace {

constexpr uint32_t kReplacement = 0xFFFD;
constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Bytes that byte-level BPE shows as themselves ('!'..'~', '¡'..'¬', '®'..'ÿ');
// the others are shifted to U+0100 and up, in byte order.
bool byte_is_printable(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteTables {
  std::array<std::string, 256> to_utf8;
  std::array<int16_t, 256 + 68> from_cpt;  // code point -> byte, -1 when none
  ByteTables() {
    from_cpt.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cpt = byte_is_printable(b) ? static_cast<uint32_t>(b) : 256u + n++;
      append_utf8(to_utf8[b], cpt);
      from_cpt[cpt] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& byte_tables() {
  static const ByteTables t;
  return t;
}

// The range a strictly valid sequence allows for its second byte (Unicode
// Table 3-7); the later bytes are always 80..BF. Returns the sequence length,
// 0 for a byte that cannot start one.
int strict_lead(uint8_t b, uint8_t* lo, uint8_t* hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b == 0xE0) { *lo = 0xA0; return 3; }
  if (b >= 0xE1 && b <= 0xEC) return 3;
  if (b == 0xED) { *hi = 0x9F; return 3; }
  if (b >= 0xEE && b <= 0xEF) return 3;
  if (b == 0xF0) { *lo = 0x90; return 4; }
  if (b >= 0xF1 && b <= 0xF3) return 4;
  if (b == 0xF4) { *hi = 0x8F; return 4; }
  return 0;
}

}  // namespace

std::vector<uint32_t> decode_utf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  auto cont = [&](size_t i) { return i < n && (p[i] & 0xC0) == 0x80; };
  size_t i = 0;
  while (i < n) {
    const uint8_t b = p[i];
    if (!(b & 0x80)) {
      out.push_back(b);
      i += 1;
    } else if (!(b & 0x40)) {
      out.push_back(kReplacement);
      i += 1;
    } else if (!(b & 0x20)) {
      if (!cont(i + 1)) { out.push_back(kReplacement); i += 1; continue; }
      out.push_back(((b & 0x1Fu) << 6) | (p[i + 1] & 0x3Fu));
      i += 2;
    } else if (!(b & 0x10)) {
      if (!cont(i + 1) || !cont(i + 2)) { out.push_back(kReplacement); i += 1; continue; }
      out.push_back(((b & 0x0Fu) << 12) | ((p[i + 1] & 0x3Fu) << 6) | (p[i + 2] & 0x3Fu));
      i += 3;
    } else if (!(b & 0x08)) {
      if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) { out.push_back(kReplacement); i += 1; continue; }
      const uint32_t cpt = ((b & 0x07u) << 18) | ((p[i + 1] & 0x3Fu) << 12) |
                           ((p[i + 2] & 0x3Fu) << 6) | (p[i + 3] & 0x3Fu);
      // llama.cpp decodes these but then fails to encode them again (an
      // exception out of llama_tokenize); a replacement character is kinder.
      out.push_back(cpt > kMaxCodePoint ? kReplacement : cpt);
      i += 4;
    } else {
      out.push_back(kReplacement);
      i += 1;
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt <= 0x7F) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt <= 0x7FF) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0xFFFF) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= kMaxCodePoint) {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    append_utf8(out, kReplacement);
  }
}

bool is_whitespace(uint32_t c) {
  if (c <= 0x7F) return (c >= 0x09 && c <= 0x0D) || c == 0x20;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

const std::string& byte_to_utf8(uint8_t b) { return byte_tables().to_utf8[b]; }

bool utf8_cpt_to_byte(uint32_t cpt, uint8_t* byte) {
  const auto& t = byte_tables().from_cpt;
  if (cpt >= t.size() || t[cpt] < 0) return false;
  *byte = static_cast<uint8_t>(t[cpt]);
  return true;
}

size_t valid_utf8_prefix(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    uint8_t lo, hi;
    const int len = strict_lead(p[i], &lo, &hi);
    if (len == 0 || i + len > s.size()) return i;
    if (len > 1 && (p[i + 1] < lo || p[i + 1] > hi)) return i;
    for (int k = 2; k < len; ++k)
      if ((p[i + k] & 0xC0) != 0x80) return i;
    i += len;
  }
  return i;
}

std::string drain_utf8(std::string& pending, bool final) {
  std::string out;
  const auto* p = reinterpret_cast<const uint8_t*>(pending.data());
  const size_t n = pending.size();
  size_t i = 0;
  while (i < n) {
    uint8_t lo, hi;
    const int len = strict_lead(p[i], &lo, &hi);
    if (len == 0) {
      append_utf8(out, kReplacement);
      i += 1;
      continue;
    }
    // Walk the sequence; stop at the first byte that breaks it (a maximal
    // ill-formed subpart: one U+FFFD) or at the end of what we have.
    int k = 1;
    bool broken = false;
    for (; k < len; ++k) {
      if (i + k >= n) break;
      const uint8_t c = p[i + k];
      const bool ok = (k == 1) ? (c >= lo && c <= hi) : ((c & 0xC0) == 0x80);
      if (!ok) { broken = true; break; }
    }
    if (k == len) {
      out.append(pending, i, len);
      i += len;
    } else if (broken) {
      append_utf8(out, kReplacement);
      i += k;
    } else {  // unfinished at the end
      if (!final) break;
      append_utf8(out, kReplacement);
      i = n;
    }
  }
  pending.erase(0, i);
  return out;
}

}  // namespace th::unicode
