#include "http/cors.h"

#include <algorithm>

namespace th::http {

std::vector<std::string> parse_cors_origins(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t' || item.back() == '/')) item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
  }
  return out;
}

std::optional<std::string> cors_allowed_origin(const std::vector<std::string>& origins, const HttpRequest& request) {
  if (origins.empty()) return std::nullopt;
  std::optional<std::string_view> origin = request.header("origin");
  if (!origin || origin->empty()) return std::nullopt;
  // A browser sends the origin exactly (scheme://host[:port], no path); compare as sent.
  const bool any = std::find(origins.begin(), origins.end(), "*") != origins.end();
  if (!any && std::find(origins.begin(), origins.end(), *origin) == origins.end()) return std::nullopt;
  return std::string(*origin);
}

bool is_cors_preflight(const HttpRequest& request) {
  return request.method == "OPTIONS" && request.header("access-control-request-method").has_value();
}

std::vector<HttpHeader> cors_headers(const std::string& origin) {
  return {{"Access-Control-Allow-Origin", origin}, {"Vary", "Origin"}};
}

HttpResponse cors_preflight_response(const std::string& origin) {
  HttpResponse r;
  r.status = 204;
  r.headers = cors_headers(origin);
  r.headers.push_back({"Access-Control-Allow-Methods", "GET, POST, OPTIONS"});
  r.headers.push_back({"Access-Control-Allow-Headers", "Authorization, Content-Type"});
  // 10 minutes: Chromium caps the cache at 2 h and Firefox at 24 h; a short one lets a
  // changed --cors-origins reach browsers soon.
  r.headers.push_back({"Access-Control-Max-Age", "600"});
  return r;
}

}  // namespace th::http
