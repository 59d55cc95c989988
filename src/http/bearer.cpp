#include "http/bearer.h"

#include "http/http_request.h"

#include <string>

namespace th::http {
// The empty asm makes the accumulator opaque, so the compiler cannot turn the
// loop into one that exits at the first difference.
uint32_t constant_time_difference(const uint8_t* a, const uint8_t* b, size_t n) {
  uint32_t diff = 0;
  for (size_t i = 0; i < n; ++i) diff |= static_cast<uint32_t>(a[i] ^ b[i]);
#if defined(__GNUC__)
  __asm__ __volatile__("" : "+r"(diff));
#endif
  return diff;
}

bool constant_time_equal(const uint8_t* a, const uint8_t* b, size_t n) {
  return constant_time_is_zero(constant_time_difference(a, b, n)) == 1;
}

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t'; }

}  // namespace

std::optional<std::string_view> bearer_credentials(std::string_view value) {
  while (!value.empty() && is_blank(value.front())) value.remove_prefix(1);
  while (!value.empty() && is_blank(value.back())) value.remove_suffix(1);
  size_t sp = 0;
  while (sp < value.size() && !is_blank(value[sp])) ++sp;
  if (!iequals_lower(value.substr(0, sp), "bearer")) return std::nullopt;  // the scheme is no secret
  std::string_view credentials = value.substr(sp);
  while (!credentials.empty() && is_blank(credentials.front())) credentials.remove_prefix(1);
  return credentials;
}

bool bearer_matches(std::optional<std::string_view> authorization, std::string_view token) {
  if (!authorization || token.empty()) return false;
  const std::optional<std::string_view> credentials = bearer_credentials(*authorization);
  if (!credentials) return false;
  const std::string_view presented = *credentials;
  // The token's bytes against the presented ones copied into a buffer of the token's
  // length (cut or zero-padded), the length difference folded into the same accumulator:
  // no exit before every byte is compared, whatever the presented length.
  std::string padded(token.size(), '\0');
  for (size_t i = 0; i < token.size(); ++i) padded[i] = i < presented.size() ? presented[i] : '\0';
  const uint32_t diff = constant_time_difference(reinterpret_cast<const uint8_t*>(padded.data()),
                                                 reinterpret_cast<const uint8_t*>(token.data()), token.size()) |
                        static_cast<uint32_t>(presented.size() != token.size());
  return constant_time_is_zero(diff) == 1;
}

}  // namespace th::http
