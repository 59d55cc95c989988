// The cell's web pages: the playground at / (chat over /v1/chat/completions, streamed) and
// the live dashboard at /dashboard (drawn from /metrics). Both are files of the web UI
// bundle (web/), embedded at build time; see http/static_asset.h.
#pragma once

#include "http/http_server.h"

namespace th::server {

/// @brief GET /, GET /dashboard and GET /ui/* (the pages' scripts and styles).
void add_web_ui_routes(http::HttpServer& server);

}  // namespace th::server
