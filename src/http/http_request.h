// One parsed HTTP/1.x request, as a handler sees it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace th::http {

struct HttpHeader {
  std::string name;  // lower case in requests (names are case-insensitive)
  std::string value;
};

/// @brief ASCII lower-case comparison of `a` with `lower` (already lower case).
inline bool iequals_lower(std::string_view a, std::string_view lower) {
  if (a.size() != lower.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

struct HttpRequest {
  std::string method;  // case-sensitive token: "GET", "POST", ...
  std::string target;  // as sent: "/v1/models?x=1", "http://host/p", "*"
  std::string path;    // the target's path, without the query ("/" for "http://host")
  std::string query;   // after '?', without it; empty when there is none
  int version_minor = 1;  // HTTP/1.0 or HTTP/1.1
  std::vector<HttpHeader> headers;  // in arrival order, names lower-cased
  std::string body;                 // de-chunked
  bool keep_alive = true;           // the connection may carry another request after this one
  bool expects_continue = false;    // "Expect: 100-continue" on an HTTP/1.1 request with a body
  std::string id;                   // unique per request (server-assigned), for logs and X-Request-Id
  std::string peer;                 // the client's "address:port" ("[v6]:port"); empty when unknown

  /// @brief The first header named `name` (any case), or nullopt.
  std::optional<std::string_view> header(std::string_view name) const {
    std::string lower(name);
    for (char& c : lower)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    for (const HttpHeader& h : headers)
      if (h.name == lower) return std::string_view(h.value);
    return std::nullopt;
  }
};

}  // namespace th::http
