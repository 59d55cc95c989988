#include "cluster/cluster_view.h"

#include <utility>

#include "http/static_asset.h"

namespace th::cluster {

void add_cluster_view_routes(http::HttpServer& server) {
  static constexpr std::pair<const char*, const char*> kPages[] = {{"/", "cluster.html"}};
  http::add_ui_routes(server, kPages);
}

}  // namespace th::cluster
