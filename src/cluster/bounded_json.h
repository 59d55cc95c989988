// The one JSON parse for everything the router reads from outside: client
// bodies, SSE chunks and answers from cells, cell heartbeats and etcd values.
//
//   Result<nlohmann::json> j = parse_json_bounded(text, JsonLimits{64, 1 << 20});
//
// nlohmann's parser itself is iterative, but the DOM it builds is copied,
// dumped and compared recursively: a 200 KB body of '[' (100,000 levels)
// overflows a proxy thread's stack the moment the value is copied or dumped
// (#15: exit 139 at ~70,000 levels). So the depth is checked on the bytes,
// in one pass, before any value exists, and the size before that.
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace th::cluster {

struct JsonLimits {
  // Arrays and objects nested in one another. The cell's API allows 64 (api_request.h);
  // the router's own documents (heartbeats, etcd values, chunks) nest at most 4.
  size_t max_depth = 64;
  size_t max_bytes = 16u << 20;
};

/// @brief A client's request body: the cell's own depth limit, and the HTTP
/// server's body cap (the router sees no bigger body).
inline constexpr JsonLimits kRequestBodyLimits{64, 16u << 20};
/// @brief A cell's SSE chunk or whole (non-streamed) answer: n choices of
/// text, token ids and logprobs, a few levels deep.
inline constexpr JsonLimits kCellAnswerLimits{32, 64u << 20};
/// @brief A heartbeat, an admin call's body, a registration value: small and flat.
inline constexpr JsonLimits kControlLimits{16, 1u << 20};
/// @brief An etcd gateway answer or watch line: a batch of events holds several
/// values (etcd_codec.cpp's kMaxWatchLine), each a small object, ~6 levels.
inline constexpr JsonLimits kEtcdLimits{16, 64u << 20};

/// @brief OK when `text` is at most max_bytes long and nests arrays and
/// objects at most max_depth deep (counted outside strings); says which
/// limit it broke otherwise. Does not check the syntax.
Status check_json_limits(std::string_view text, JsonLimits limits);

/// @brief check_json_limits, then a strict parse (no comments, no trailing
/// bytes). An error names the broken limit or says the text is not JSON.
Result<nlohmann::json> parse_json_bounded(std::string_view text, JsonLimits limits);
/// @brief The same, keeping the members' order (bodies the router forwards).
Result<nlohmann::ordered_json> parse_ordered_json_bounded(std::string_view text, JsonLimits limits);

}  // namespace th::cluster
