#include "http/static_asset.h"

#include <string>

namespace th::http {

const StaticAsset* find_asset(std::string_view path) {
  for (const StaticAsset& a : embedded_assets())
    if (a.path == path) return &a;
  return nullptr;
}

namespace {

HttpResponse page_response(int status, std::string body, std::string_view content_type) {
  HttpResponse r = text_response(status, std::move(body), std::string(content_type));
  r.set_header("Content-Security-Policy", std::string(kPageCsp));
  r.set_header("X-Content-Type-Options", "nosniff");
  r.set_header("Referrer-Policy", "no-referrer");
  // The bundle changes with the binary, not while it runs; the names carry no hash, so a
  // browser revalidates rather than keeping an old copy across an upgrade.
  r.set_header("Cache-Control", "no-cache");
  return r;
}

}  // namespace

HttpResponse asset_response(const StaticAsset& asset) {
  return page_response(200, std::string(asset.bytes), asset.content_type);
}

HttpResponse ui_not_built_response() {
  return page_response(200,
                       "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>tokenhive</title></head>"
                       "<body><main><h1>tokenhive</h1><p>The web UI was not built: node or its npm packages were "
                       "missing when this binary was built (run <code>npm ci</code>, then build again). The API is "
                       "served as usual: /v1/chat/completions, /v1/completions, /metrics, /health.</p></main></body>"
                       "</html>\n",
                       "text/html; charset=utf-8");
}

void add_ui_routes(HttpServer& server, std::span<const std::pair<const char*, const char*>> pages) {
  for (const auto& [url, file] : pages) {
    const StaticAsset* asset = find_asset(file);
    server.route("GET", url, [asset](const HttpRequest&, ResponseWriter w) {
      w.send(asset ? asset_response(*asset) : ui_not_built_response());
    });
  }
  server.route("GET", "/ui/*", [](const HttpRequest& r, ResponseWriter w) {
    const StaticAsset* asset = find_asset(r.path);
    w.send(asset ? asset_response(*asset) : error_response(404, "no such file of the web UI"));
  });
}

}  // namespace th::http
