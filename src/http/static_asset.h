// Files built into the binary (the web UI: web/build.mjs bundles it at build time and
// writes the table into the build folder; a build without node has an empty table) and
// the responses that serve them, each with the Content-Security-Policy of our pages.
#pragma once

#include <span>
#include <string_view>
#include <utility>

#include "http/http_response.h"
#include "http/http_server.h"

namespace th::http {

struct StaticAsset {
  std::string_view path;  // "/ui/playground.js", "playground.html"
  std::string_view content_type;
  std::string_view bytes;
};

/// @brief Every embedded file; empty when the UI was not built. Defined in the generated
/// web_assets.cpp (build folder).
std::span<const StaticAsset> embedded_assets();

/// @brief The embedded file at `path`; null when there is none.
const StaticAsset* find_asset(std::string_view path);

/// @brief Our pages load nothing from anywhere but this origin: no CDN, no remote fonts,
/// no inline script, and no framing by other sites.
inline constexpr std::string_view kPageCsp =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// @brief 200 with the file, its type, the CSP, nosniff and no-referrer.
HttpResponse asset_response(const StaticAsset& asset);

/// @brief 200 with a page that says the UI was not built (no node or npm packages at build
/// time) and that the API is served as usual; with the same headers.
HttpResponse ui_not_built_response();

/// @brief Routes GET on each (url, embedded file) page, e.g. {"/", "playground.html"}, and
/// GET /ui/* to the embedded scripts and styles (404 for any other).
void add_ui_routes(HttpServer& server, std::span<const std::pair<const char*, const char*>> pages);

}  // namespace th::http
