#include "server/web_ui.h"

#include <utility>

#include "http/static_asset.h"

namespace th::server {

void add_web_ui_routes(http::HttpServer& server) {
  static constexpr std::pair<const char*, const char*> kPages[] = {{"/", "playground.html"},
                                                                  {"/dashboard", "dashboard.html"}};
  http::add_ui_routes(server, kPages);
}

}  // namespace th::server
