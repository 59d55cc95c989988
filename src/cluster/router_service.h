// The router's API: the same OpenAI-compatible and native endpoints as a
// cell, in front of a CellPool. Each generation request is proxied to the
// cell a RoutingPolicy picks, and kept alive across cell failures.
//
// A request's life (no thread of its own: every step runs on the upstream loop's
// thread, upstream_loop.h, as callbacks on its sockets and timers):
//   1. Parse just what routing needs (stream, n, prompt, priority, seed,
//      max_tokens); give it a seed if the client did not (so that any cell
//      draws the same tokens), and ask the cell for token ids.
//   2. Pick a cell (load, prefix affinity, priority) and send it there.
//   3. Streaming, one choice: every chunk's token ids and text length go into
//      the request's snapshot (prompt ids, generated ids, bytes of text sent)
//      before the chunk goes to the client, without the ids it did not ask for.
//      If the cell fails mid-stream (the connection breaks, or the heartbeat
//      declares the cell dead and wakes the request), the snapshot goes to
//      another cell as a continuation (ApiContinuation: prompt + generated ids,
//      same seed, text from the byte the client has) and the client's stream
//      goes on: no token lost, none repeated.
//   4. Anything that fails before its first byte reached the client (a
//      non-streaming request, a refused connection, a 503 from a draining
//      cell, a 429 from a full one) is a plain retry on another cell.
// Each request moves at most max_migrations times. Streams with several
// choices are retried before their first byte but not moved after it (they
// end with an error event).
//
// Also: GET /v1/models (from any live cell), /health, /ready (a live cell
// exists), /metrics (the router's), GET /admin/cells (the pool as the router
// sees it), POST /admin/cells {"url"} (a cell joins; with discovery, the
// answer names the etcd endpoint the cell should register on) and POST
// /admin/cells/leave {"url"}. The POSTs need the admin token, or with none a
// loopback-only listener (403 otherwise).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "cluster/cell_pool.h"
#include "cluster/routing_policy.h"

namespace th::http {
class HttpServer;
}

namespace th::cluster {

struct RouterServiceOptions {
  std::string policy = "prefix";  // "prefix" (affinity, falling back to load) or "load"
  int max_migrations = 3;         // moves of one request to another cell after a failure
  int max_attempts = 8;           // cells tried for one request, all causes together
  // Requests proxied at once; more wait in a queue. Each costs a socket to its cell and a few
  // KiB (no thread), so the cap is the HTTP server's connection cap, not the CPU count.
  int workers = 10000;
  int64_t max_queue = 4096;       // ... of at most this many (then 503)
  // How long a request with no eligible cell waits for one to come back before its 503.
  std::chrono::milliseconds wait_for_cell{2000};
  std::string discovery;          // etcd://host:port, told to cells that join
  // POST /admin/* (cells joining and leaving) needs "Authorization: Bearer <token>" when
  // set. Unset, those calls are taken only when the listener is loopback-only
  // (admin_loopback_only): on any other address anyone who reaches the port could
  // register a cell of their choosing or remove real ones (#15), so they get 403.
  std::string admin_token;
  bool admin_loopback_only = true;  // the HTTP listener accepts only loopback connections
};

/// @brief True when `host` (a listen address) accepts only connections from this
/// machine: 127.0.0.0/8, ::1, "localhost". Any other name or address is not.
bool is_loopback_host(std::string_view host);

/// @brief Whether POST /admin/* is open, and how, for the start-up line:
/// "token", "loopback" (no token, loopback listener) or "refused".
std::string_view admin_mode(const RouterServiceOptions& options);

class RouterService {
 public:
  /// @brief `pool` must outlive the service.
  RouterService(RouterServiceOptions options, CellPool& pool);
  /// @brief stop().
  ~RouterService();
  RouterService(const RouterService&) = delete;
  RouterService& operator=(const RouterService&) = delete;

  /// @brief Checks the options (an unknown policy is an error) and starts the upstream loop.
  Status start();
  /// @brief Registers every route on `server` (before it starts).
  void add_routes(http::HttpServer& server);
  /// @brief New requests get 503; requests in flight go on.
  void drain();
  /// @brief Cancels whatever is in flight and joins the upstream loop.
  void stop();
  int64_t in_flight() const;
  /// @brief Called from the pool's heartbeat threads when a cell dies (metrics).
  void on_cell_death(const std::string& url, std::chrono::nanoseconds detection);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace th::cluster
