// Constant-time secret comparison: API keys and admin tokens are checked in
// time that does not depend on where a guess first differs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace th::http {

/// @brief The OR of the bytes' differences of `a` and `b` (`n` bytes each):
/// 0 exactly when equal, computed with no branch on the data.
uint32_t constant_time_difference(const uint8_t* a, const uint8_t* b, size_t n);

/// @brief 1 when x == 0, else 0, without a branch (x < 2^63).
inline uint64_t constant_time_is_zero(uint64_t x) { return (x - 1) >> 63; }

/// @brief Compares `a` and `b`, each of exactly `n` bytes, in time that
/// depends only on `n`: true when equal.
bool constant_time_equal(const uint8_t* a, const uint8_t* b, size_t n);

/// @brief The credentials of an Authorization value whose scheme is Bearer (RFC 9110: the
/// scheme in any case, blanks around the parts), possibly empty; nullopt for another scheme.
std::optional<std::string_view> bearer_credentials(std::string_view value);

/// @brief True when `authorization` (the header's value, if any) is "Bearer <token>":
/// the scheme in any case, blanks around the scheme and the token allowed (as
/// ApiKeyStore::authenticate reads a key). The token is compared in time that depends
/// on its own length only, not on the presented one's or where they first differ. An
/// empty `token` matches nothing. The admin endpoints' check.
bool bearer_matches(std::optional<std::string_view> authorization, std::string_view token);

}  // namespace th::http
