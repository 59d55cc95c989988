// What a cell (one engine process behind the cluster router) says about its
// own load in each heartbeat: GET /admin/load on the cell answers with these
// fields. The router keeps the last one per cell and the routing policies
// (routing_policy.h) read it; nothing here talks to the network.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace th::cluster {

/// @brief What a cell's heartbeat reports (GET /admin/load on a cell).
struct CellLoad {
  int64_t running = 0;           // sequences the engine is running
  int64_t waiting = 0;           // queued requests
  int64_t kv_free_blocks = 0;    // KV blocks free on the cell's first tier
  int64_t kv_total_blocks = 0;   // 0 = not reported (then no KV penalty applies)
  double tokens_per_second = 0;  // generated tokens/s, recent
  bool draining = false;         // takes no new work

  friend bool operator==(const CellLoad&, const CellLoad&) = default;
};

/// @brief A heartbeat's body. An error when it is not a JSON object within
/// kControlLimits (bounded_json.h): that cell's heartbeat failed. Fields
/// missing or of the wrong type read as 0 (not ready: draining).
Result<CellLoad> parse_cell_load(std::string_view body);

}  // namespace th::cluster
