// The router's web page at /: the cluster view (cells with their state, load and heartbeat
// age from GET /admin/cells; deaths, migrations and drains as events), a file of the web
// UI bundle (web/) embedded at build time; see http/static_asset.h.
#pragma once

#include "http/http_server.h"

namespace th::cluster {

/// @brief GET / and GET /ui/* (the page's script and style).
void add_cluster_view_routes(http::HttpServer& server);

}  // namespace th::cluster
