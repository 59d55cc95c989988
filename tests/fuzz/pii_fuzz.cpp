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

#include "server/pii_recognizers.h"
#include "server/pii_redactor.h"

namespace {

using namespace th::server;

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
  const PiiKinds kinds = (control & 0x80) ? (control & kAllPiiKinds) : kAllPiiKinds;
  const RedactMode mode = (seed & 1) ? RedactMode::kPseudonymize : RedactMode::kMask;

  const std::vector<PiiSpan> spans = find_pii(text, kinds);
  size_t last = 0;
  for (const PiiSpan& s : spans) {
    if (s.begin < last || s.end <= s.begin || s.end > text.size()) die("span out of order or bounds");
    if ((kinds & pii_bit(s.kind)) == 0) die("span of a kind not asked for");
    for (size_t i = s.begin; i < s.end; ++i)
      if (static_cast<unsigned char>(text[i]) >= 0x80) die("span holds a non-ASCII byte");
    last = s.end;
  }

  const PiiScan partial = scan_pii(text, 0, false, kinds);
  if (partial.decided > text.size() || partial.spans.size() > spans.size()) die("partial scan too far");
  for (size_t i = 0; i < partial.spans.size(); ++i)
    if (!(partial.spans[i] == spans[i]) || partial.spans[i].end > partial.decided) die("partial scan differs");
  if (partial.spans.size() < spans.size() && spans[partial.spans.size()].begin < partial.decided)
    die("partial scan decided past a match it missed");
  if (text.size() - partial.decided > pii_hold_back_bound(kinds)) die("partial scan holds more than the bound");

  Redactor whole_r({mode, kinds});
  const std::string whole = whole_r.redact(text);
  Redactor stream_r({mode, kinds});
  StreamingRedactor streaming(stream_r);
  std::string streamed;
  for (std::string_view piece : split(text, seed)) {
    streamed += streaming.push(piece);
    if (streaming.held() > pii_hold_back_bound(kinds)) die("stream holds more than the bound");
  }
  streamed += streaming.flush();
  if (streamed != whole) die("streaming differs from whole-text redaction");

  if (mode == RedactMode::kPseudonymize) {
    if (text.find('<') == std::string_view::npos && whole_r.restore(whole) != text) die("restore does not round-trip");
    const std::string restored = whole_r.restore(text);
    StreamingRestorer restorer(whole_r);
    std::string pieces;
    for (std::string_view piece : split(text, seed + 7)) {
      pieces += restorer.push(piece);
      if (restorer.held() >= kMaxPiiTokenLength) die("restorer holds a whole token");
    }
    pieces += restorer.flush();
    if (pieces != restored) die("streaming restore differs from restore");
  }

  if (redact_for_log(text) != Redactor().redact(text)) die("redact_for_log differs from masking");
  return 0;
}
