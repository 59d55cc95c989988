// PII recognizers: e-mail addresses, phone numbers, Chinese resident identity
// numbers, payment card numbers, IBANs, IPv4 and IPv6 addresses, found as
// byte spans over UTF-8 text. Hand-written scanners, no regex: each one is a
// bounded read from a candidate start, so the same scan runs over a whole text
// or over a stream (scan_pii with final = false stops at the first position
// whose outcome still depends on bytes not yet seen). The exact rules per
// recognizer are in docs/CONVENTIONS.md ("PII recognizers").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace th::pii {

enum class PiiKind : uint8_t { kEmail, kPhone, kCnId, kCard, kIban, kIpv4, kIpv6 };
inline constexpr int kPiiKindCount = 7;

/// @brief A set of kinds, one bit per PiiKind.
using PiiKinds = uint32_t;
inline constexpr PiiKinds pii_bit(PiiKind k) { return PiiKinds{1} << static_cast<int>(k); }
inline constexpr PiiKinds kAllPiiKinds = (PiiKinds{1} << kPiiKindCount) - 1;

/// @brief "EMAIL", "PHONE", "CN_ID", "CARD", "IBAN", "IPV4", "IPV6": the masks' and tokens' name.
std::string_view pii_kind_name(PiiKind kind);

/// @brief One match: text[begin, end), ASCII bytes only (so never part of a UTF-8 character).
struct PiiSpan {
  size_t begin = 0;
  size_t end = 0;
  PiiKind kind = PiiKind::kEmail;
  bool operator==(const PiiSpan&) const = default;
};

/// @brief Every match in `text`, in order, non-overlapping. At each position the longest
/// match of any kind in `kinds` wins (ties: CN_ID, CARD, IBAN, PHONE, IPV4, IPV6, EMAIL) and
/// the scan goes on after it.
std::vector<PiiSpan> find_pii(std::string_view text, PiiKinds kinds = kAllPiiKinds);

/// @brief What scan_pii found: the matches, and where the decided part of the text ends.
struct PiiScan {
  std::vector<PiiSpan> spans;
  size_t decided = 0;
};

/// @brief Scans text[from, ...) with text[0, from) as what came before (only its last
/// kPiiLookBehind bytes are ever read). With `final`, the text ends at text.size() and
/// everything is decided. Without it, more may follow: the scan stops at the first position
/// whose outcome could change with more bytes, and `decided` is that position; spans all end
/// at or before it, and they are exactly the matches find_pii gives there over any text that
/// starts with `text`.
PiiScan scan_pii(std::string_view text, size_t from, bool final, PiiKinds kinds = kAllPiiKinds);

/// @brief Bytes before a candidate that a recognizer reads (its left boundary rule).
inline constexpr size_t kPiiLookBehind = 2;

/// @brief The most bytes, from a candidate's first byte, that the recognizers of `kinds` read
/// to decide it: the longest possible match plus the bytes after it that its right boundary
/// rule looks at. A stream never holds back more than this (EMAIL: 319; the others <= 50).
size_t pii_hold_back_bound(PiiKinds kinds = kAllPiiKinds);

}  // namespace th::pii
