// The counters every event loop of one server updates.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "http/http_server_options.h"

namespace th::http {

struct HttpServerCounters {
  std::atomic<size_t> open_connections{0};
  std::atomic<size_t> in_flight{0};
  std::atomic<uint64_t> accepted{0}, rejected{0}, requests{0}, bad_requests{0}, timeouts{0};

  HttpServerStats snapshot() const {
    HttpServerStats s;
    s.open_connections = open_connections.load();
    s.in_flight = in_flight.load();
    s.accepted = accepted.load();
    s.rejected = rejected.load();
    s.requests = requests.load();
    s.bad_requests = bad_requests.load();
    s.timeouts = timeouts.load();
    return s;
  }
};

}  // namespace th::http
