#include "http/http_router.h"

#include <algorithm>

namespace th::http {

void HttpRouter::add(std::string method, std::string path, HttpHandler handler) {
  Route r;
  r.prefix = path.size() >= 2 && path.ends_with("/*");
  if (r.prefix) path.pop_back();
  r.method = std::move(method);
  r.path = std::move(path);
  r.handler = std::move(handler);
  routes_.push_back(std::move(r));
}

HttpRouter::Match HttpRouter::find(std::string_view method, std::string_view path) const {
  // The best path: an exact one, else the longest prefix.
  const Route* best = nullptr;
  for (const Route& r : routes_) {
    const bool hit = r.prefix ? path.starts_with(r.path) : path == r.path;
    if (!hit) continue;
    if (!best || (best->prefix && (!r.prefix || r.path.size() > best->path.size()))) best = &r;
  }
  Match m;
  if (!best) {
    m.status = 404;
    return m;
  }
  std::vector<std::string_view> methods;
  for (const Route& r : routes_) {
    if (r.prefix != best->prefix || r.path != best->path) continue;
    if (r.method == method) {
      m.handler = &r.handler;
      return m;
    }
    methods.push_back(r.method);
  }
  std::sort(methods.begin(), methods.end());
  methods.erase(std::unique(methods.begin(), methods.end()), methods.end());
  m.status = 405;
  for (std::string_view x : methods) {
    if (!m.allow.empty()) m.allow += ", ";
    m.allow += x;
  }
  return m;
}

}  // namespace th::http
