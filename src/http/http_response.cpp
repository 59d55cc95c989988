#include "http/http_response.h"

#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

namespace th::http {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool is_tchar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c != '\0' && std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos);
}

// A header a handler sets may carry text from a request (a model name, an
// id); one with CR, LF or NUL in it would split the response, so it is dropped.
bool header_is_safe(const HttpHeader& h) {
  if (h.name.empty()) return false;
  for (char c : h.name)
    if (!is_tchar(static_cast<unsigned char>(c))) return false;
  for (char c : h.value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7f) return false;
  }
  return true;
}

bool is_framing_header(std::string_view name) {
  return iequals_lower(name, "content-length") || iequals_lower(name, "transfer-encoding") ||
         iequals_lower(name, "connection");
}

// IMF-fixdate (RFC 9110 5.6.7), written by hand: strftime's %a and %b follow the locale.
void append_date(std::string& out) {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[tm.tm_wday % 7], tm.tm_mday,
                kMonths[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  out += "Date: ";
  out += buf;
  out += "\r\n";
}

}  // namespace

HttpResponse& HttpResponse::set_header(std::string_view name, std::string value) {
  const std::string l = lower(name);
  std::erase_if(headers, [&](const HttpHeader& h) { return lower(h.name) == l; });
  headers.push_back({std::string(name), std::move(value)});
  return *this;
}

std::string_view status_reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

bool status_has_no_body(int status) { return status < 200 || status == 204 || status == 304; }

HttpResponse json_response(int status, const nlohmann::json& body) {
  HttpResponse r;
  r.status = status;
  r.headers.push_back({"Content-Type", "application/json"});
  // Invalid UTF-8 in a string (echoed from a request) becomes U+FFFD instead of an exception.
  r.body = json_text(body);
  return r;
}

HttpResponse text_response(int status, std::string body, std::string content_type) {
  HttpResponse r;
  r.status = status;
  r.headers.push_back({"Content-Type", std::move(content_type)});
  r.body = std::move(body);
  return r;
}

std::string_view default_error_type(int status) {
  if (status == 401) return "authentication_error";
  if (status == 403) return "permission_error";
  if (status == 404) return "not_found_error";
  if (status == 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

HttpResponse error_response(int status, ApiError error) {
  nlohmann::json e = {
      {"message", std::move(error.message)},
      {"type", error.type.empty() ? std::string(default_error_type(status)) : std::move(error.type)},
      {"param", nullptr},
      {"code", nullptr},
  };
  if (error.param) e["param"] = std::move(*error.param);
  if (error.code) e["code"] = std::move(*error.code);
  return json_response(status, nlohmann::json{{"error", std::move(e)}});
}

HttpResponse error_response(int status, std::string message) {
  return error_response(status, ApiError{std::move(message), "", std::nullopt, std::nullopt});
}

void set_retry_after(HttpResponse& response, std::chrono::seconds after) {
  response.set_header("Retry-After", std::to_string(after.count() < 0 ? 0 : after.count()));
}

std::string serialize_head(int status, const std::vector<HttpHeader>& headers, BodyFraming framing,
                           size_t content_length, bool keep_alive, int version_minor, std::string_view request_id) {
  std::string out;
  out.reserve(256);
  out += "HTTP/1.1 ";
  out += std::to_string(status);
  out += ' ';
  out += status_reason(status);
  out += "\r\n";
  for (const HttpHeader& h : headers) {
    if (is_framing_header(h.name) || !header_is_safe(h)) continue;
    out += h.name;
    out += ": ";
    out += h.value;
    out += "\r\n";
  }
  append_date(out);
  if (!request_id.empty()) {
    out += "X-Request-Id: ";
    out += request_id;
    out += "\r\n";
  }
  if (!status_has_no_body(status)) {
    switch (framing) {
      case BodyFraming::kContentLength:
        out += "Content-Length: ";
        out += std::to_string(content_length);
        out += "\r\n";
        break;
      case BodyFraming::kChunked:
        out += "Transfer-Encoding: chunked\r\n";
        break;
      case BodyFraming::kUntilClose:
        keep_alive = false;
        break;
    }
  }
  if (!keep_alive) out += "Connection: close\r\n";
  else if (version_minor == 0) out += "Connection: keep-alive\r\n";
  out += "\r\n";
  return out;
}

}  // namespace th::http
