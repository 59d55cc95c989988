// A complete HTTP response, the helpers that build the common ones (JSON,
// OpenAI-shaped errors, Retry-After), and the serializer of a response head.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "http/http_request.h"

namespace th::http {

struct HttpResponse {
  int status = 200;
  // Content-Length, Transfer-Encoding and Connection are the server's to set:
  // any given here are dropped.
  std::vector<HttpHeader> headers;
  std::string body;

  /// @brief Replaces every header named `name` (any case) by one with `value`.
  HttpResponse& set_header(std::string_view name, std::string value);
};

/// @brief "OK", "Not Found", ...; "Unknown" for a status without a phrase here.
std::string_view status_reason(int status);

/// @brief `body` serialized, with Content-Type: application/json.
/// @brief Compact JSON text, invalid UTF-8 replaced by U+FFFD instead of a throw: what goes
/// on the wire and into logs (json or ordered_json).
template <class Json>
std::string json_text(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

HttpResponse json_response(int status, const nlohmann::json& body);
HttpResponse text_response(int status, std::string body, std::string content_type = "text/plain; charset=utf-8");

/// @brief An error in OpenAI's shape:
/// {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}.
struct ApiError {
  std::string message;
  std::string type;                  // empty: default_error_type(status)
  std::optional<std::string> param;  // the request field at fault; null when none
  std::optional<std::string> code;   // a machine-readable code; null when none
};

/// @brief OpenAI's error type for a status: "invalid_request_error" (4xx),
/// "authentication_error" (401), "permission_error" (403), "not_found_error"
/// (404), "rate_limit_error" (429), "server_error" (5xx).
std::string_view default_error_type(int status);
HttpResponse error_response(int status, ApiError error);
HttpResponse error_response(int status, std::string message);
/// @brief Sets Retry-After in whole seconds (429 and 503 carry it).
void set_retry_after(HttpResponse& response, std::chrono::seconds after);

enum class BodyFraming {
  kContentLength,  // a complete body of known length
  kChunked,        // a stream to an HTTP/1.1 client
  kUntilClose,     // a stream to an HTTP/1.0 client: the body ends when the connection does
};

/// @brief The status line and headers of a response: the caller's headers
/// (framing ones and any with bytes that could split a response dropped),
/// then Date, X-Request-Id, the framing headers and Connection.
std::string serialize_head(int status, const std::vector<HttpHeader>& headers, BodyFraming framing,
                           size_t content_length, bool keep_alive, int version_minor, std::string_view request_id);

/// @brief True when `status` never carries a body (1xx, 204, 304).
bool status_has_no_body(int status);

}  // namespace th::http
