// API keys for `tokenhive serve --api-keys FILE`: who may call, as which
// tenant, at which priorities and rates.
//
// The key file: one key per line,
//
//   KEY TENANT [max_priority=high|normal|low|INT] [rpm=N] [tpm=N] [pii=off|mask|pseudonymize] [max_concurrency=N]
//
// fields separated by spaces or tabs, in any order after TENANT, each option
// at most once. A field that starts with `#` begins a comment to the end of
// the line; blank and comment-only lines are ignored; CRLF line ends are
// accepted.
//   KEY     16..256 printable ASCII characters (0x21..0x7e), not starting
//           with `#`; each key at most once in the file.
//   TENANT  [A-Za-z0-9_.-]{1,64}: the prefix-cache namespace and the name in
//           the access log. Several keys may share a tenant.
//   max_priority  the most important priority the key may ask for (lower =
//           more important, as in engine/request.h: high -1, normal 0, low 1,
//           or any int32). A request asking for a more important one is a
//           403, never silently demoted. Absent: no restriction.
//   rpm, tpm  requests and tokens (prompt + completion) per minute, decimal
//           numbers >= 0; 0 or absent: unlimited (server/rate_limiter.h).
// A file with no key is an error: a server with --api-keys and no key would
// refuse every request. Every error names the file and line ("keys.txt:3:
// ..."), and no message ever contains a key.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/priority.h"
#include "base/status.h"
#include "http/bearer.h"
#include "http/http_response.h"

namespace th::server {

inline constexpr size_t kMinApiKeyLength = 16;
inline constexpr size_t kMaxApiKeyLength = 256;
inline constexpr size_t kMaxTenantLength = 64;

/// @brief What the API does with personal data in a tenant's prompts and outputs
/// (pii/pii_redactor.h): nothing; masks it ("[EMAIL]") both ways; or replaces it in the
/// prompt by pseudonyms ("<EMAIL_1>") the model sees, restored in the reply.
enum class PiiPolicy : uint8_t { Off, Mask, Pseudonymize };

struct ApiKey {
  std::string key;
  std::string tenant;
  // The most important (lowest) priority this key may ask for; INT32_MIN
  // (the default) allows every priority.
  int32_t max_priority = std::numeric_limits<int32_t>::min();
  double requests_per_minute = 0;  // 0: unlimited
  double tokens_per_minute = 0;    // 0: unlimited
  PiiPolicy pii = PiiPolicy::Off;  // `pii=off|mask|pseudonymize`
  int64_t max_concurrency = 0;     // requests of this key's tenant in flight at once; 0: unlimited
};

/// @brief The 403 for a request asking for a priority more important than
/// `key` allows ("priority high not allowed for this key", param "priority"),
/// or nullopt when it is allowed.
std::optional<http::ApiError> check_priority(const ApiKey& key, int32_t requested);

/// @brief The keys of one file, and the lookup of an Authorization header.
class ApiKeyStore {
 public:
  /// @brief Reads and parses the key file at `path` (at most 16 MiB).
  static Result<ApiKeyStore> load(const std::string& path);
  /// @brief Parses key-file text; `source_name` prefixes every error.
  static Result<ApiKeyStore> parse(std::string_view text, std::string_view source_name);

  /// @brief The key an Authorization header value presents ("Bearer <key>",
  /// the scheme in any case), or nullptr for a missing, malformed or unknown
  /// one. Constant-time in the key's contents: the presented key is compared
  /// with EVERY stored key over the full kMaxApiKeyLength bytes, lengths
  /// folded into the same accumulator, with no early exit; the time depends
  /// only on the number of stored keys and the header's length.
  const ApiKey* authenticate(std::string_view authorization_header_value) const;

  /// @brief The same lookup for a bare key (no scheme).
  const ApiKey* find_key(std::string_view presented) const;

  const std::vector<ApiKey>& keys() const { return keys_; }
  size_t size() const { return keys_.size(); }

 private:
  ApiKeyStore() = default;

  // keys_[i].key zero-padded to kMaxApiKeyLength, contiguous, so every
  // comparison reads the same number of bytes whatever the key's length.
  std::vector<ApiKey> keys_;
  std::vector<uint8_t> padded_;
};


}  // namespace th::server
