// PII redaction over the recognizers of pii_recognizers.h: masking ("[EMAIL]")
// or pseudonymizing ("<EMAIL_1>", restorable), for whole texts and for text
// streamed piece by piece (StreamingRedactor holds back only what a match
// could still span, as StopStringFilter does for stop strings).
//
// Typical use in a request handler:
//   Redactor r({.mode = RedactMode::kPseudonymize});   // one per request (or per tenant)
//   prompt = r.redact(prompt);                           // the model never sees the values
//   StreamingRestorer out(r);                            // the client gets them back
//   for each piece: send(out.push(piece)); then send(out.flush());
// and for logs, redact_for_log(line).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "pii/pii_recognizers.h"

namespace th::pii {

enum class RedactMode : uint8_t {
  kMask,          // every match becomes "[KIND]"
  kPseudonymize,  // every match becomes "<KIND_n>", the same n for the same value (byte for byte)
};

struct RedactPolicy {
  RedactMode mode = RedactMode::kMask;
  PiiKinds kinds = kAllPiiKinds;
};

/// @brief Redacts texts under one policy. In kPseudonymize mode it keeps the map from
/// tokens to values, so its lifetime is the scope of the tokens (a request, or a tenant's
/// session): the same value gets the same token for as long as the Redactor lives, and
/// restore() puts the values back. Not thread-safe.
class Redactor {
 public:
  explicit Redactor(RedactPolicy policy = {});

  /// @brief `text` with every match replaced.
  std::string redact(std::string_view text);
  /// @brief `text` with every token this Redactor issued replaced by its value; anything
  /// else, other tokens included, unchanged. restore(redact(t)) == t when t has no tokens.
  std::string restore(std::string_view text) const;

  const RedactPolicy& policy() const { return policy_; }
  /// @brief Distinct values pseudonymized so far.
  size_t pseudonym_count() const { return value_of_.size(); }

  /// @brief The replacement for one match (assigns a token in kPseudonymize mode).
  std::string replacement(PiiKind kind, std::string_view value);
  /// @brief Appends text[from, to) to `out` with `spans` (inside that range, in order) replaced.
  void apply(std::string_view text, size_t from, size_t to, const std::vector<PiiSpan>& spans,
             std::string& out);

 private:
  RedactPolicy policy_;
  std::unordered_map<std::string, std::string> token_of_;  // kind + value -> token
  std::unordered_map<std::string, std::string> value_of_;  // token -> value
  std::array<uint32_t, kPiiKindCount> issued_{};
};

/// @brief Redacts text that arrives in pieces. The concatenation of push()es and the final
/// flush() equals redactor.redact(whole text) for every way of splitting it (pseudonyms
/// included: they are issued in the same order). What it holds back is the text from the
/// first position whose match is still undecided: at most pii_hold_back_bound(kinds) bytes
/// (319 with e-mail, 50 without), and in prose usually just the word being written.
class StreamingRedactor {
 public:
  /// @brief `redactor` must outlive this.
  explicit StreamingRedactor(Redactor& redactor) : redactor_(redactor) {}

  /// @brief Appends `piece`; returns the redacted text that is now decided (maybe empty).
  std::string push(std::string_view piece);
  /// @brief The end of the text: everything still held, redacted.
  std::string flush();
  /// @brief Bytes held back now.
  size_t held() const { return buffer_.size() - context_; }

 private:
  Redactor& redactor_;
  std::string buffer_;  // the last bytes already released (<= kPiiLookBehind), then the held ones
  size_t context_ = 0;  // how many of buffer_'s bytes are released context
};

/// @brief Restores a Redactor's tokens in text that arrives in pieces (the model's reply):
/// holds back a tail that could still be the start of a token ("<EM", "<EMAIL_1"), at most
/// kMaxPiiTokenLength - 1 bytes. Concatenated output equals redactor.restore(whole text).
class StreamingRestorer {
 public:
  explicit StreamingRestorer(const Redactor& redactor) : redactor_(redactor) {}
  std::string push(std::string_view piece);
  std::string flush();
  size_t held() const { return held_.size(); }

 private:
  const Redactor& redactor_;
  std::string held_;
};

/// @brief The longest token: "<" + the longest kind name + "_" + 10 digits + ">".
inline constexpr size_t kMaxPiiTokenLength = 1 + 5 + 1 + 10 + 1;

/// @brief `line` with every match of every kind masked: for log lines, always on.
std::string redact_for_log(std::string_view line);

}  // namespace th::pii
