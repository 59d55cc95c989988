// Cross-origin requests (CORS), for browser applications on another origin than the
// server's: off unless origins are configured (`serve --cors-origins`).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_request.h"
#include "http/http_response.h"

namespace th::http {

/// @brief Splits "https://a.example, https://b.example" (or "*") into origins; empty
/// entries dropped.
std::vector<std::string> parse_cors_origins(std::string_view list);

/// @brief The request's Origin when `origins` allows it ("*" allows every one); nullopt
/// when CORS is off (no origins), the request has no Origin, or it is not allowed.
std::optional<std::string> cors_allowed_origin(const std::vector<std::string>& origins, const HttpRequest& request);

/// @brief A preflight: OPTIONS with Access-Control-Request-Method.
bool is_cors_preflight(const HttpRequest& request);

/// @brief The headers every response to an allowed origin carries: the origin echoed
/// (so a credentialed request works too) and Vary: Origin (caches keep one copy per origin).
std::vector<HttpHeader> cors_headers(const std::string& origin);

/// @brief 204 to a preflight from an allowed origin: the methods and headers the API uses.
HttpResponse cors_preflight_response(const std::string& origin);

}  // namespace th::http
