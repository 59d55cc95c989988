// What the client sends and gets back: header fields and a response.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace th::client {

struct Header {
  std::string name;  // lower case in a Response (names are case-insensitive)
  std::string value;
};

/// @brief ASCII lower case of `s`.
std::string to_lower_ascii(std::string_view s);

struct Response {
  int status = 0;
  std::vector<Header> headers;  // in arrival order, names lower-cased
  // The body. stream() leaves it empty for a 2xx response (on_data got the
  // bytes) and holds the whole body of any other status (an error document).
  std::string body;
  // Tries this call made: 1 without a retry, 0 for a cache hit. The silent
  // redo of a request whose pooled connection turned out closed is not one.
  int attempts = 1;
  bool from_cache = false;  // served by the response cache, no request made
  bool cancelled = false;   // stream(): on_data returned false; the connection was closed

  /// @brief The first header named `name` (any case), or nullopt.
  std::optional<std::string_view> header(std::string_view name) const;
};

}  // namespace th::client
