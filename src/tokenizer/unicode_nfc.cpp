// NFC as UAX #15 section 3.11 describes it. The quick check decodes in place and costs a bit
// test per code point on most pages (CJK text here: 116-225 MB/s, against 26-31 with a
// decoded copy and two binary searches a code point; noisy machine, alternated runs). The
// rest is paid only by text it cannot pass: decomposition and composition each
// binary-search a table of about 2,000 rows (11 steps), the combining classes one of 388
// runs (9 steps).
#include "tokenizer/unicode_nfc.h"

#include <algorithm>
#include <vector>

#include "tokenizer/unicode.h"
#include "tokenizer/unicode_nfc_tables.h"

namespace th::unicode {

namespace {

namespace t = nfc_tables;

// Hangul syllables (Unicode 15, section 3.12): S = SBase + (L * VCount + V) * TCount + T.
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount;
constexpr uint32_t kSCount = kLCount * kNCount;

// No code point below U+0300 is combining or NFC_QC=No/Maybe, and every one at or above it
// takes a lead byte of 0xCC or more. Below it, U+00C0..U+02FF still decompose (À, ť, ...):
// a mark after one can reorder and compose with its parts.
constexpr uint32_t kFirstInteresting = 0x300;
constexpr unsigned char kFirstInterestingLead = 0xCC;
constexpr uint32_t kFirstDecomposable = 0xC0;

bool noisy_page(uint32_t cp) {
  const uint32_t page = cp >> 8;
  return page < 0x110000 / 256 && (t::kNoisyPages[page / 64] >> (page % 64) & 1);
}

const t::Mapping* find_mapping(uint32_t cp) {
  const t::Mapping* end = t::kMappings + t::kMappingsSize;
  const t::Mapping* it = std::lower_bound(t::kMappings, end, cp, [](const t::Mapping& m, uint32_t c) { return m.cp < c; });
  return it != end && it->cp == cp ? it : nullptr;
}

bool qc_not_yes(uint32_t cp) {
  const t::Run* end = t::kNfcQcNotYes + t::kNfcQcNotYesSize;
  const t::Run* it = std::upper_bound(t::kNfcQcNotYes, end, cp, [](uint32_t c, const t::Run& r) { return c < r.first; });
  return it != t::kNfcQcNotYes && cp <= (it - 1)->last;
}

// The primary composites, by (first, second).
struct Composite {
  uint32_t first, second, cp;
};
const std::vector<Composite>& composites() {
  static const std::vector<Composite> table = [] {
    std::vector<Composite> v;
    for (size_t i = 0; i < t::kMappingsSize; ++i) {
      const t::Mapping& m = t::kMappings[i];
      if (m.second != 0 && !(m.second & t::kNotComposed)) v.push_back({m.first, m.second, m.cp});
    }
    std::sort(v.begin(), v.end(), [](const Composite& a, const Composite& b) {
      return a.first != b.first ? a.first < b.first : a.second < b.second;
    });
    return v;
  }();
  return table;
}

// The primary composite of a + b, or 0 when there is none.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a - kLBase < kLCount && b - kVBase < kVCount) return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a - kSBase < kSCount && (a - kSBase) % kTCount == 0 && b - kTBase - 1 < kTCount - 1) return a + (b - kTBase);
  const std::vector<Composite>& c = composites();
  auto it = std::lower_bound(c.begin(), c.end(), std::pair{a, b}, [](const Composite& x, std::pair<uint32_t, uint32_t> k) {
    return x.first != k.first ? x.first < k.first : x.second < k.second;
  });
  return it != c.end() && it->first == a && it->second == b ? it->cp : 0;
}

struct Cp {
  uint32_t cp;
  uint8_t ccc;
};

// Appends cp's full canonical decomposition, each code point put in canonical order among the
// non-starters before it (a stable insertion: ties keep their order).
void decompose(uint32_t cp, std::vector<Cp>* out) {
  if (cp - kSBase < kSCount) {
    const uint32_t s = cp - kSBase;
    out->push_back({kLBase + s / kNCount, 0});
    out->push_back({kVBase + s % kNCount / kTCount, 0});
    if (s % kTCount != 0) out->push_back({kTBase + s % kTCount, 0});
    return;
  }
  if (cp >= kFirstDecomposable) {
    if (const t::Mapping* m = find_mapping(cp)) {
      decompose(m->first, out);
      if (m->second != 0) decompose(m->second & ~t::kNotComposed, out);
      return;
    }
  }
  const uint8_t ccc = combining_class(cp);
  size_t at = out->size();
  while (ccc != 0 && at > 0 && (*out)[at - 1].ccc > ccc) --at;
  out->insert(out->begin() + static_cast<std::ptrdiff_t>(at), {cp, ccc});
}

// Canonical composition of a decomposed, ordered stretch, appended as UTF-8.
void compose_into(std::vector<Cp>& d, std::string* out) {
  size_t n = 0;            // d[0, n) is the result so far
  ptrdiff_t starter = -1;  // index in it of the last starter
  for (const Cp& c : d) {
    if (starter >= 0) {
      const bool adjacent = static_cast<size_t>(starter) + 1 == n;
      // Blocked: a character between the starter and c has class 0 or >= c's.
      const bool blocked = !adjacent && (d[n - 1].ccc == 0 || d[n - 1].ccc >= c.ccc);
      if (!blocked) {
        if (const uint32_t composite = compose(d[starter].cp, c.cp)) {
          d[starter].cp = composite;
          continue;
        }
      }
    }
    if (c.ccc == 0) starter = static_cast<ptrdiff_t>(n);
    d[n++] = c;
  }
  for (size_t i = 0; i < n; ++i) append_utf8(*out, d[i].cp);
}

}  // namespace

uint8_t combining_class(uint32_t cp) {
  if (cp < kFirstInteresting || !noisy_page(cp)) return 0;
  const t::CccRun* end = t::kCcc + t::kCccSize;
  const t::CccRun* it = std::upper_bound(t::kCcc, end, cp, [](uint32_t c, const t::CccRun& r) { return c < r.first; });
  return it != t::kCcc && cp <= (it - 1)->last ? (it - 1)->ccc : 0;
}

bool nfc_quick_yes(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    if (p[i] < kFirstInterestingLead) {  // ASCII, a code point below U+0300 or a continuation byte
      ++i;
      continue;
    }
    const size_t len = utf8_len(static_cast<char>(p[i]));
    if (p[i] >= 0xF5 || i + len > n) return false;  // not UTF-8: to_nfc decides
    uint32_t cp = p[i] & (len == 2 ? 0x1Fu : len == 3 ? 0x0Fu : 0x07u);
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = cp << 6 | (p[i + k] & 0x3Fu);
    }
    if (noisy_page(cp) && (qc_not_yes(cp) || combining_class(cp) != 0)) return false;
    i += len;
  }
  return true;
}

std::string to_nfc(std::string_view text) {
  if (nfc_quick_yes(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  std::vector<Cp> d;
  while (!text.empty()) {
    const size_t valid = valid_utf8_prefix(text);
    d.clear();
    for (uint32_t cp : decode_utf8(text.substr(0, valid))) decompose(cp, &d);
    compose_into(d, &out);
    if (valid == text.size()) break;
    out.push_back(text[valid]);  // an invalid byte: kept, and composition starts again after it
    text.remove_prefix(valid + 1);
  }
  return out;
}

}  // namespace th::unicode
