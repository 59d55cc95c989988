#include "http/bearer.h"

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

bool bearer_matches(std::optional<std::string_view> authorization, std::string_view token) {
  const std::string want = "Bearer " + std::string(token);
  if (!authorization || authorization->size() != want.size()) return false;
  return constant_time_equal(reinterpret_cast<const uint8_t*>(authorization->data()),
                             reinterpret_cast<const uint8_t*>(want.data()), want.size());
}

}  // namespace th::http
