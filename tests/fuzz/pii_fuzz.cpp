// libFuzzer target for the PII recognizers and redactors. The first byte picks the kinds
// and the mode, the second seeds the split points; the rest is the text. Checks: spans in
// bounds, non-empty, ordered, disjoint, ASCII; a non-final scan decides a prefix of the
// final scan's matches; streaming over the split equals redacting the whole text and never
// holds more than the stated bound; pseudonymize then restore gives the text back when it
// has no '<'; streaming restore equals restore.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "pii/pii_recognizers.h"
#include "pii/pii_redactor.h"

namespace {

using namespace th;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "pii_fuzz: %s\n", what);
  std::abort();
}

// Split points from a small xorshift seeded by `seed`: pieces of 0..16 bytes.
std::vector<std::string_view> split(std::string_view text, uint32_t seed) {
  std::vector<std::string_view> pieces;
  uint32_t x = seed * 2654435761u + 1;
  for (size_t at = 0; at < text.size();) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    const size_t n = std::min<size_t>(x % 17, text.size() - at);
    pieces.push_back(text.substr(at, n));
    at += n;
  }
  return pieces;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t control = data[0];
  const uint32_t seed = data[1];
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  // Bit 7 off (most inputs): every kind; on: the kinds in bits 0..6.
  const pii::PiiKinds kinds = (control & 0x80) ? (control & pii::kAllPiiKinds) : pii::kAllPiiKinds;
  const pii::RedactMode mode = (seed & 1) ? pii::RedactMode::kPseudonymize : pii::RedactMode::kMask;

  const std::vector<pii::PiiSpan> spans = pii::find_pii(text, kinds);
  size_t last = 0;
  for (const pii::PiiSpan& s : spans) {
    if (s.begin < last || s.end <= s.begin || s.end > text.size()) die("span out of order or bounds");
    if ((kinds & pii::pii_bit(s.kind)) == 0) die("span of a kind not asked for");
    for (size_t i = s.begin; i < s.end; ++i)
      if (static_cast<unsigned char>(text[i]) >= 0x80) die("span holds a non-ASCII byte");
    last = s.end;
  }

  const pii::PiiScan partial = pii::scan_pii(text, 0, false, kinds);
  if (partial.decided > text.size() || partial.spans.size() > spans.size()) die("partial scan too far");
  for (size_t i = 0; i < partial.spans.size(); ++i)
    if (!(partial.spans[i] == spans[i]) || partial.spans[i].end > partial.decided) die("partial scan differs");
  if (partial.spans.size() < spans.size() && spans[partial.spans.size()].begin < partial.decided)
    die("partial scan decided past a match it missed");
  if (text.size() - partial.decided > pii::pii_hold_back_bound(kinds)) die("partial scan holds more than the bound");

  pii::Redactor whole_r({mode, kinds});
  const std::string whole = whole_r.redact(text);
  pii::Redactor stream_r({mode, kinds});
  pii::StreamingRedactor streaming(stream_r);
  std::string streamed;
  for (std::string_view piece : split(text, seed)) {
    streamed += streaming.push(piece);
    if (streaming.held() > pii::pii_hold_back_bound(kinds)) die("stream holds more than the bound");
  }
  streamed += streaming.flush();
  if (streamed != whole) die("streaming differs from whole-text redaction");

  if (mode == pii::RedactMode::kPseudonymize) {
    if (text.find('<') == std::string_view::npos && whole_r.restore(whole) != text) die("restore does not round-trip");
    const std::string restored = whole_r.restore(text);
    pii::StreamingRestorer restorer(whole_r);
    std::string pieces;
    for (std::string_view piece : split(text, seed + 7)) {
      pieces += restorer.push(piece);
      if (restorer.held() >= pii::kMaxPiiTokenLength) die("restorer holds a whole token");
    }
    pieces += restorer.flush();
    if (pieces != restored) die("streaming restore differs from restore");
  }

  if (pii::redact_for_log(text) != pii::Redactor().redact(text)) die("redact_for_log differs from masking");
  return 0;
}
