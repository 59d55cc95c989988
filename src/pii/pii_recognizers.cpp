#include "pii/pii_recognizers.h"

#include <algorithm>
#include <array>
#include <cstddef>

namespace th::pii {
namespace {

constexpr int kEdge = -1;  // before the text's start, or at its end

// The text as a recognizer reads it. Reads before 0 are the start of the text; reads at or
// past the end are its end when the text is final, and otherwise unknown: the read is noted
// and whatever the recognizer concluded is thrown away (the position waits for more bytes).
// Every read goes through at(), which is what makes a stream's result equal the whole text's.
class Text {
 public:
  Text(std::string_view text, bool final) : text_(text), final_(final) {}
  int at(size_t i) const {
    if (i < text_.size()) return static_cast<unsigned char>(text_[i]);
    if (!final_) unknown_ = true;
    return kEdge;
  }
  // Reads before the start (i = p - k wrapping around) are the edge too.
  int before(size_t p, size_t k) const { return p >= k ? at(p - k) : kEdge; }
  // The first '@' at or after p, or npos (cached: the scan's positions only grow).
  size_t next_at_sign(size_t p) const {
    if (p < at_from_ || (at_sign_ != std::string_view::npos && at_sign_ < p)) {
      at_sign_ = text_.find('@', p);
      at_from_ = p;
    } else if (at_sign_ == std::string_view::npos) {
      at_from_ = std::min(at_from_, p);
    }
    return at_sign_;
  }
  size_t size() const { return text_.size(); }
  bool unknown() const { return unknown_; }
  void clear_unknown() { unknown_ = false; }

 private:
  std::string_view text_;
  bool final_;
  mutable bool unknown_ = false;
  mutable size_t at_from_ = std::string_view::npos;  // next_at_sign's cache: searched from here
  mutable size_t at_sign_ = std::string_view::npos;
};

constexpr bool is_digit(int c) { return c >= '0' && c <= '9'; }
constexpr bool is_upper(int c) { return c >= 'A' && c <= 'Z'; }
constexpr bool is_alpha(int c) { return is_upper(c) || (c >= 'a' && c <= 'z'); }
constexpr bool is_alnum(int c) { return is_digit(c) || is_alpha(c); }
constexpr bool is_word(int c) { return is_alnum(c) || c == '_'; }
constexpr bool is_hex(int c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int digit(int c) { return c - '0'; }

// A number starts where the byte before is not a word byte, nor a '.' after a digit (the
// tail of 1.5 or of a version 1.2.3). Bytes >= 0x80 are boundaries: CJK text often runs
// straight into a number (电话13812345678).
bool number_starts(const Text& t, size_t p) {
  const int b = t.before(p, 1);
  if (is_word(b)) return false;
  return !(b == '.' && is_digit(t.before(p, 2)));
}

// A number ends where the next byte is not a word byte, nor a '.' before a digit.
bool number_ends(const Text& t, size_t e) {
  const int c = t.at(e);
  if (is_word(c)) return false;
  return !(c == '.' && is_digit(t.at(e + 1)));
}

// ---- e-mail ---------------------------------------------------------------------------
// local@domain: local is 1..64 of [A-Za-z0-9._%+-], no leading, trailing or double dot;
// domain is 2+ labels of [A-Za-z0-9-]{1,63} (no leading or trailing '-'), at most 253
// bytes, the last label 2+ letters. Full stops after the domain are not part of it.
// Reads at most 64 + 1 + 254 bytes.
constexpr size_t kEmailRead = 64 + 1 + 254;

constexpr bool is_local(int c) { return is_alnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-'; }
constexpr bool is_domain(int c) { return is_alnum(c) || c == '.' || c == '-'; }

size_t match_email(const Text& t, size_t p) {
  if (is_local(t.before(p, 1))) return 0;
  int c = t.at(p);
  if (!is_local(c) || c == '.') return 0;
  // Most words have no '@' after them: when none is within reach, and all of the reach is
  // already there (so the answer cannot depend on bytes to come), skip the word's scan.
  if (p + 65 <= t.size() && t.next_at_sign(p) - p > 64) return 0;
  size_t i = p;
  int prev = 0;
  while (is_local(c = t.at(i))) {
    if (c == '.' && prev == '.') return 0;
    prev = c;
    if (++i - p > 64) return 0;
  }
  if (prev == '.' || c != '@') return 0;
  const size_t d = ++i;
  while (is_domain(t.at(i)))
    if (++i - d > 253) return 0;
  size_t e = i;
  while (e > d && t.at(e - 1) == '.') --e;
  // Labels of [d, e).
  size_t labels = 0, start = d;
  bool last_alpha = true;
  for (size_t k = d; k <= e; ++k) {
    if (k < e && t.at(k) != '.') continue;
    const size_t len = k - start;
    if (len == 0 || len > 63 || t.at(start) == '-' || t.at(k - 1) == '-') return 0;
    ++labels;
    last_alpha = len >= 2;
    for (size_t j = start; j < k && last_alpha; ++j) last_alpha = is_alpha(t.at(j));
    start = k + 1;
  }
  if (labels < 2 || !last_alpha) return 0;
  return e - p;
}

// ---- phone numbers ----------------------------------------------------------------------
// E.164: '+', a digit 1-9, then 8..15 digits in all, groups of digits joined by one of
// ' ', '-', '.', optionally opening a '(' group that a ')' closes ("+44 (0)20 7946 0958",
// "+1 (415) 555-2671"). A group that would take the count past 15 is not taken (the number
// ends before its separator); 16+ digits in a row are no number at all.
constexpr size_t kE164Read = 1 + 16 + 15 * 2 + 3;

size_t match_e164(const Text& t, size_t p) {
  if (t.at(p) != '+') return 0;
  const int b = t.before(p, 1);
  if (is_word(b) || b == '+') return 0;
  if (!is_digit(t.at(p + 1)) || t.at(p + 1) == '0') return 0;
  size_t i = p + 1, digits = 0;
  size_t end = 0, end_digits = 0;  // the number as taken so far: it closes every '(' it opens
  bool open = false;
  while (true) {
    size_t group = 0;
    while (is_digit(t.at(i))) {
      ++i;
      ++group;
      if (digits + group > 15) {
        if (end == 0) return 0;  // 16+ digits with no separator: a longer digit run
        goto done;
      }
    }
    digits += group;
    if (!open) end = i, end_digits = digits;
    {
      size_t j = i;
      int c = t.at(j);
      bool opens = false;
      if (c == ')') {
        if (!open) break;
        open = false;
        end = j + 1, end_digits = digits;
        c = t.at(++j);
        if (c == ' ' || c == '-') c = t.at(++j);
      } else {
        if (c == ' ' || c == '-' || c == '.') c = t.at(++j);
        if (c == '(' && !open) opens = true, c = t.at(++j);
      }
      if (j == i || !is_digit(c)) break;
      open = open || opens;
      i = j;
    }
  }
done:
  if (end_digits < 8) return 0;
  // After a ')' the number may end at the parenthesis; otherwise at a digit.
  if (!number_ends(t, end)) return 0;
  return end - p;
}

// Mainland-China mobile: 1[3-9] and 9 more digits, either 11 in a row (not inside a longer
// digit run) or grouped 3-4-4 by one ' ' or '-' used twice.
constexpr size_t kCnMobileRead = 13 + 2;

size_t match_cn_mobile(const Text& t, size_t p) {
  if (t.at(p) != '1' || t.at(p + 1) < '3' || t.at(p + 1) > '9' || !number_starts(t, p)) return 0;
  size_t i = p;
  while (i - p < 12 && is_digit(t.at(i))) ++i;
  if (i - p == 11) return number_ends(t, i) ? 11 : 0;
  if (i - p != 3) return 0;
  const int sep = t.at(p + 3);
  if (sep != ' ' && sep != '-') return 0;
  for (size_t k = p + 4; k < p + 13; ++k) {
    const bool want_sep = k == p + 8;
    if (want_sep ? t.at(k) != sep : !is_digit(t.at(k))) return 0;
  }
  return number_ends(t, p + 13) ? 13 : 0;
}

// ---- Chinese resident identity number (GB 11643) ----------------------------------------
// 6-digit region code (first two digits a province code), 8-digit birth date YYYYMMDD
// (1900..2099, a real day), 3-digit sequence, then the ISO 7064 MOD 11-2 check character
// (0-9 or X/x).
constexpr size_t kCnIdRead = 18 + 2;

bool cn_province(int code) {
  static constexpr std::array<int, 37> kCodes = {11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34, 35,
                                                 36, 37, 41, 42, 43, 44, 45, 46, 50, 51, 52, 53, 54,
                                                 61, 62, 63, 64, 65, 71, 81, 82, 83, 91, 0};
  return code != 0 && std::find(kCodes.begin(), kCodes.end(), code) != kCodes.end();
}

bool valid_date(int y, int m, int d) {
  if (y < 1900 || y > 2099 || m < 1 || m > 12 || d < 1) return false;
  static constexpr int kDays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (d > kDays[m - 1]) return false;
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return !(m == 2 && d == 29 && !leap);
}

size_t match_cn_id(const Text& t, size_t p) {
  if (!is_digit(t.at(p)) || !number_starts(t, p)) return 0;
  int d[18];
  for (size_t k = 0; k < 17; ++k) {
    const int c = t.at(p + k);
    if (!is_digit(c)) return 0;
    d[k] = digit(c);
  }
  const int last = t.at(p + 17);
  if (!is_digit(last) && last != 'X' && last != 'x') return 0;
  if (!number_ends(t, p + 18)) return 0;
  if (!cn_province(d[0] * 10 + d[1])) return 0;
  const int y = d[6] * 1000 + d[7] * 100 + d[8] * 10 + d[9];
  if (!valid_date(y, d[10] * 10 + d[11], d[12] * 10 + d[13])) return 0;
  static constexpr int kWeights[17] = {7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2};
  int sum = 0;
  for (int k = 0; k < 17; ++k) sum += d[k] * kWeights[k];
  static constexpr char kCheck[11] = {'1', '0', 'X', '9', '8', '7', '6', '5', '4', '3', '2'};
  const char want = kCheck[sum % 11];
  const char got = last == 'x' ? 'X' : static_cast<char>(last);
  return got == want ? 18 : 0;
}

// ---- payment cards -----------------------------------------------------------------------
// 13..19 digits, Luhn-valid, with an issuer prefix whose lengths include this one. Written
// either as one run of digits (exactly the number: not inside a longer run) or in groups
// joined by one separator, ' ' or '-', the same throughout: the first group 4 digits, the
// others 1..6. A grouped number may end at any group boundary; the longest valid one wins.
constexpr size_t kCardRead = 19 + 18 + 2;

bool luhn(const int* d, size_t n) {
  int sum = 0;
  for (size_t k = 0; k < n; ++k) {
    int v = d[n - 1 - k];
    if (k % 2 == 1) v = v * 2 > 9 ? v * 2 - 9 : v * 2;
    sum += v;
  }
  return sum % 10 == 0;
}

bool card_issuer(const int* d, size_t n) {
  auto prefix = [&](size_t k) {
    int v = 0;
    for (size_t j = 0; j < k; ++j) v = v * 10 + d[j];
    return v;
  };
  const int p1 = prefix(1), p2 = prefix(2), p3 = prefix(3), p4 = prefix(4);
  const bool len16_19 = n >= 16 && n <= 19;
  if (p1 == 4) return n == 13 || n == 16 || n == 19;                              // Visa
  if ((p2 >= 51 && p2 <= 55) || (p4 >= 2221 && p4 <= 2720)) return n == 16;       // Mastercard
  if (p2 == 34 || p2 == 37) return n == 15;                                        // Amex
  if (p4 == 6011 || p2 == 65 || (p3 >= 644 && p3 <= 649)) return len16_19;         // Discover
  if (p2 == 62) return len16_19;                                                   // UnionPay
  if (p4 >= 3528 && p4 <= 3589) return len16_19;                                   // JCB
  if (p2 == 36 || p2 == 38 || p2 == 39 || (p3 >= 300 && p3 <= 305)) return n >= 14 && n <= 19;  // Diners
  return false;
}

size_t match_card(const Text& t, size_t p) {
  if (!is_digit(t.at(p)) || !number_starts(t, p)) return 0;
  int d[19];
  size_t n = 0, i = p, groups = 0, best = 0;
  int sep = 0;
  while (true) {
    size_t group = 0;
    int c;
    bool overflow = false;
    while (is_digit(c = t.at(i))) {
      if (n == 19 || (groups > 0 && group == 6)) {
        overflow = true;
        break;
      }
      d[n++] = digit(c);
      ++i;
      ++group;
    }
    if (overflow) {
      if (groups == 0) return 0;  // 20+ digits in a row
      break;                      // this group is not part of the number
    }
    if (groups == 0 && group != 4) {
      // Not a grouped number: the run must be the whole number.
      if (n < 13 || !number_ends(t, i)) return 0;
      return card_issuer(d, n) && luhn(d, n) ? n : 0;
    }
    ++groups;
    const int next = t.at(i);
    const bool continues = (next == ' ' || next == '-') && (sep == 0 || next == sep) && is_digit(t.at(i + 1));
    if (n >= 13 && (continues || number_ends(t, i)) && card_issuer(d, n) && luhn(d, n)) best = i - p;
    if (!continues) break;
    sep = next;
    ++i;
  }
  return best;
}

// ---- IBAN --------------------------------------------------------------------------------
// Country code (one with a known IBAN length), 2 check digits, then the BBAN ([A-Z0-9]),
// exactly the country's length in all; written as one run or in groups of 4 joined by single
// spaces; mod 97 of the rearranged number == 1. The BBAN's national format is not checked.
constexpr size_t kIbanRead = 34 + 8 + 1;

struct IbanLength {
  char cc[3];
  int length;
};
constexpr IbanLength kIbanLengths[] = {
    {"AD", 24}, {"AE", 23}, {"AL", 28}, {"AT", 20}, {"AZ", 28}, {"BA", 20}, {"BE", 16}, {"BG", 22},
    {"BH", 22}, {"BR", 29}, {"CH", 21}, {"CR", 22}, {"CY", 28}, {"CZ", 24}, {"DE", 22}, {"DK", 18},
    {"DO", 28}, {"EE", 20}, {"EG", 29}, {"ES", 24}, {"FI", 18}, {"FO", 18}, {"FR", 27}, {"GB", 22},
    {"GE", 22}, {"GI", 23}, {"GL", 18}, {"GR", 27}, {"GT", 28}, {"HR", 21}, {"HU", 28}, {"IE", 22},
    {"IL", 23}, {"IS", 26}, {"IT", 27}, {"JO", 30}, {"KW", 30}, {"KZ", 20}, {"LB", 28}, {"LI", 21},
    {"LT", 20}, {"LU", 20}, {"LV", 21}, {"MC", 27}, {"MD", 24}, {"ME", 22}, {"MK", 19}, {"MR", 27},
    {"MT", 31}, {"MU", 30}, {"NL", 18}, {"NO", 15}, {"PK", 24}, {"PL", 28}, {"PS", 29}, {"PT", 25},
    {"QA", 29}, {"RO", 24}, {"RS", 22}, {"SA", 24}, {"SE", 24}, {"SI", 19}, {"SK", 24}, {"SM", 27},
    {"TN", 24}, {"TR", 26}, {"UA", 29}, {"VG", 24}, {"XK", 20},
};

int iban_length(int a, int b) {
  for (const IbanLength& e : kIbanLengths)
    if (e.cc[0] == a && e.cc[1] == b) return e.length;
  return 0;
}

size_t match_iban(const Text& t, size_t p) {
  const int a = t.at(p), b = t.at(p + 1);
  if (!is_upper(a) || !is_upper(b) || is_alnum(t.before(p, 1))) return 0;
  if (!is_digit(t.at(p + 2)) || !is_digit(t.at(p + 3))) return 0;
  const int len = iban_length(a, b);
  if (len == 0) return 0;
  const bool spaced = t.at(p + 4) == ' ';
  char c[34];
  size_t i = p;
  for (int n = 0; n < len; ++n) {
    if (spaced && n > 0 && n % 4 == 0 && t.at(i++) != ' ') return 0;
    const int ch = t.at(i++);
    if (!is_upper(ch) && !is_digit(ch)) return 0;
    c[n] = static_cast<char>(ch);
  }
  if (is_alnum(t.at(i))) return 0;
  int rem = 0;
  for (int n = 0; n < len; ++n) {
    const char ch = c[(n + 4) % len];
    if (is_digit(ch)) {
      rem = (rem * 10 + digit(ch)) % 97;
    } else {
      rem = (rem * 100 + (ch - 'A' + 10)) % 97;
    }
  }
  return rem == 1 ? i - p : 0;
}

// ---- IP addresses ------------------------------------------------------------------------
// IPv4: four decimal octets 0..255 without leading zeros, joined by '.', not part of a
// longer dotted number (no '.' or word byte before, no word byte or '.'+digit after).
constexpr size_t kIpv4Read = 15 + 2;

// Parses a dotted quad at p; returns its length or 0. No boundary checks.
size_t parse_ipv4(const Text& t, size_t p) {
  size_t i = p;
  for (int octet = 0; octet < 4; ++octet) {
    if (octet > 0 && t.at(i++) != '.') return 0;
    const size_t s = i;
    int v = 0;
    while (is_digit(t.at(i)) && i - s < 4) v = v * 10 + digit(t.at(i++));
    const size_t len = i - s;
    if (len == 0 || len > 3 || v > 255 || (len > 1 && t.at(s) == '0')) return 0;
  }
  return i - p;
}

size_t match_ipv4(const Text& t, size_t p) {
  if (!is_digit(t.at(p))) return 0;
  const int b = t.before(p, 1);
  if (is_word(b) || b == '.') return 0;
  const size_t len = parse_ipv4(t, p);
  return len != 0 && number_ends(t, p + len) ? len : 0;
}

// IPv6: groups of 1..4 hex digits joined by ':', either 8 of them or fewer with one '::',
// the last two optionally a dotted quad (::ffff:192.0.2.1). To keep C++'s a::b and hex
// words out: at least 2 groups and at least one decimal digit. No ':', '.' or word byte
// right before or after.
constexpr size_t kIpv6Read = 45 + 3;

size_t match_ipv6(const Text& t, size_t p) {
  const int b = t.before(p, 1);
  if (is_word(b) || b == ':' || b == '.') return 0;
  size_t i = p, groups = 0;
  bool compressed = false, has_digit = false;
  if (t.at(i) == ':') {
    if (t.at(i + 1) != ':') return 0;
    compressed = true;
    i += 2;
  }
  while (true) {
    const size_t s = i;
    while (is_hex(t.at(i)) && i - s < 5) has_digit |= is_digit(t.at(i++));
    const size_t len = i - s;
    if (len == 0) {
      if (s == p + 2 && compressed) break;  // "::" then no group
      if (compressed && t.before(s, 1) == ':' && t.before(s, 2) == ':') break;  // trailing "::"
      return 0;
    }
    if (len > 4) return 0;
    if (t.at(i) == '.') {
      // A dotted quad as the last two groups; any other '.' ends the address (and the right
      // boundary rule below decides).
      if (const size_t v4 = groups <= 6 ? parse_ipv4(t, s) : 0; v4 != 0) {
        groups += 2;
        has_digit = true;
        i = s + v4;
        break;
      }
    }
    ++groups;
    if (t.at(i) != ':') break;
    if (t.at(i + 1) == ':') {
      if (compressed) return 0;
      compressed = true;
      i += 2;
      continue;
    }
    if (!is_hex(t.at(i + 1))) break;
    ++i;
  }
  if (groups > 8 || (compressed ? groups > 7 || groups < 2 : groups != 8) || !has_digit) return 0;
  const int c = t.at(i);
  if (is_word(c) || c == ':' || (c == '.' && is_hex(t.at(i + 1)))) return 0;
  return i - p;
}

// ---- the scan ----------------------------------------------------------------------------

struct Recognizer {
  PiiKind kind;
  size_t (*match)(const Text&, size_t);
  size_t read;  // the most bytes it reads from the candidate's start
};

// In tie order: at one position the longest match wins, then the earliest here.
constexpr Recognizer kRecognizers[] = {
    {PiiKind::kCnId, match_cn_id, kCnIdRead},       {PiiKind::kCard, match_card, kCardRead},
    {PiiKind::kIban, match_iban, kIbanRead},        {PiiKind::kPhone, match_e164, kE164Read},
    {PiiKind::kPhone, match_cn_mobile, kCnMobileRead}, {PiiKind::kIpv4, match_ipv4, kIpv4Read},
    {PiiKind::kIpv6, match_ipv6, kIpv6Read},        {PiiKind::kEmail, match_email, kEmailRead},
};

constexpr size_t kRecognizerCount = sizeof(kRecognizers) / sizeof(kRecognizers[0]);

// Per first byte, the recognizers (bits by index in kRecognizers) that can start there:
// digits for the numbers and IPs, uppercase letters for IBANs, hex letters and ':' for IPv6,
// '+' for E.164, and whatever an e-mail's local part may start with. A 0 skips the byte.
struct StartTable {
  uint16_t mask[256] = {};
  bool alnum[256] = {};
  constexpr StartTable() {
    for (int c = 0; c < 256; ++c) {
      alnum[c] = is_alnum(c);
      for (size_t r = 0; r < kRecognizerCount; ++r) {
        bool can = false;
        switch (kRecognizers[r].kind) {
          case PiiKind::kCnId:
          case PiiKind::kCard:
          case PiiKind::kIpv4: can = is_digit(c); break;
          case PiiKind::kIban: can = is_upper(c); break;
          case PiiKind::kPhone: can = kRecognizers[r].match == match_e164 ? c == '+' : c == '1'; break;
          case PiiKind::kIpv6: can = is_hex(c) || c == ':'; break;
          case PiiKind::kEmail: can = is_local(c) && c != '.'; break;
        }
        if (can) mask[c] |= static_cast<uint16_t>(1u << r);
      }
    }
  }
};
constexpr StartTable kStart;

}  // namespace

std::string_view pii_kind_name(PiiKind kind) {
  switch (kind) {
    case PiiKind::kEmail: return "EMAIL";
    case PiiKind::kPhone: return "PHONE";
    case PiiKind::kCnId: return "CN_ID";
    case PiiKind::kCard: return "CARD";
    case PiiKind::kIban: return "IBAN";
    case PiiKind::kIpv4: return "IPV4";
    case PiiKind::kIpv6: return "IPV6";
  }
  return "PII";
}

PiiScan scan_pii(std::string_view text, size_t from, bool final, PiiKinds kinds) {
  PiiScan out;
  Text t(text, final);
  size_t p = std::min(from, text.size());
  uint16_t enabled = 0;
  for (size_t r = 0; r < kRecognizerCount; ++r)
    if (kinds & pii_bit(kRecognizers[r].kind)) enabled |= static_cast<uint16_t>(1u << r);
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  while (p < text.size()) {
    // Every recognizer's left boundary refuses a start right after an ASCII letter or digit,
    // so only word starts and punctuation get past this: the scan is about linear.
    const uint16_t mask = kStart.mask[bytes[p]] & enabled;
    if (mask == 0 || (p > 0 && kStart.alnum[bytes[p - 1]])) {
      ++p;
      continue;
    }
    t.clear_unknown();
    size_t best = 0;
    PiiKind kind = PiiKind::kEmail;
    for (size_t r = 0; r < kRecognizerCount; ++r) {
      if ((mask & (1u << r)) == 0) continue;
      const size_t len = kRecognizers[r].match(t, p);
      if (len > best) best = len, kind = kRecognizers[r].kind;
    }
    if (t.unknown()) {
      out.decided = p;
      return out;
    }
    if (best == 0) {
      ++p;
      continue;
    }
    out.spans.push_back({p, p + best, kind});
    p += best;
  }
  out.decided = p;
  return out;
}

std::vector<PiiSpan> find_pii(std::string_view text, PiiKinds kinds) {
  return scan_pii(text, 0, true, kinds).spans;
}

size_t pii_hold_back_bound(PiiKinds kinds) {
  size_t bound = 0;
  for (const Recognizer& r : kRecognizers)
    if (kinds & pii_bit(r.kind)) bound = std::max(bound, r.read);
  return bound;
}

}  // namespace th::pii
