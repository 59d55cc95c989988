// tokenhive router: the API of a cell in front of many cells (cluster/).
//
//   tokenhive router --cell http://10.0.0.7:8080 --cell http://10.0.0.8:8080
//   tokenhive router --discovery etcd://127.0.0.1:2379      # cells found on etcd
//   tokenhive serve -m model.gguf --join http://router:8000   # a cell joins at run time
//
// Cells are watched by heartbeats (GET /admin/load every --heartbeat-ms); one
// that stops answering is dead within --dead-after-ms and its streams move to
// another cell. On SIGTERM the router stops taking requests, lets the ones in
// flight finish (up to --shutdown-timeout) and exits 0.
#include <CLI/CLI.hpp>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/sd_notify.h"
#include "cli/flag_env.h"
#include "cli/parse_flags.h"
#include "cli/verbs.h"
#include "cluster/cell_pool.h"
#include "cluster/cell_registry.h"
#include "cluster/router_service.h"
#include "http/http_server.h"
#include "http/shutdown_signal.h"

namespace th::cli {

int run_router(int argc, char** argv) {
  CLI::App app{"Route the OpenAI-compatible and native API to many cells: load- and prefix-aware, failure "
               "detection by heartbeats, streams moved to a healthy cell when theirs fails.",
               "tokenhive router"};
  http::HttpServerOptions http;
  http.port = 8000;
  std::vector<std::string> cells;
  cluster::RouterServiceOptions ro;
  int64_t heartbeat_ms = 50, heartbeat_timeout_ms = 150, dead_after_ms = 300;
  double shutdown_timeout = 30;
  app.add_option("--host", http.host, "address to listen on")->capture_default_str();
  app.add_option("--port", http.port, "port; 0: an ephemeral one (printed)")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--http-threads", http.threads, "HTTP event-loop threads")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--cell", cells, "a cell's base URL, http://host:port (repeatable)");
  app.add_option("--discovery", ro.discovery, "find cells on etcd: etcd://host:port (cells register with serve --discovery)");
  app.add_option("--policy", ro.policy, "routing: prefix (affinity, then load) or load")
      ->check(CLI::IsMember({"prefix", "load"}))->capture_default_str();
  app.add_option("--max-migrations", ro.max_migrations, "moves of one stream to another cell after failures")
      ->check(CLI::Range(0, 100))->capture_default_str();
  app.add_option("--workers", ro.workers, "requests proxied at once (each a socket to its cell, no thread); more wait in a queue")
      ->check(CLI::Range(1, 65536))->capture_default_str();
  app.add_option("--heartbeat-ms", heartbeat_ms, "interval of the heartbeats to each cell")->check(CLI::Range(5, 60000))->capture_default_str();
  app.add_option("--heartbeat-timeout-ms", heartbeat_timeout_ms, "a heartbeat unanswered this long failed")
      ->check(CLI::Range(5, 60000))->capture_default_str();
  app.add_option("--dead-after-ms", dead_after_ms, "a cell with no answered heartbeat for this long is dead")
      ->check(CLI::Range(10, 600000))->capture_default_str();
  app.add_option("--admin-token", ro.admin_token, "bearer token POST /admin/* needs (default: $TOKENHIVE_ADMIN_TOKEN; unset: admin calls only on a loopback listener)");
  app.add_option("--shutdown-timeout", shutdown_timeout, "seconds requests in flight get to finish after SIGTERM")
      ->check(CLI::Range(0.0, 3600.0))->capture_default_str();
  env_for_every_flag(app);  // TOKENHIVE_<FLAG>, as serve; the command line wins
  if (std::optional<int> rc = parse_flags(app, "router", argc, argv)) return *rc;
  if (ro.admin_token.empty()) {
    if (const char* t = std::getenv("TOKENHIVE_ADMIN_TOKEN")) ro.admin_token = t;
  }

  ro.admin_loopback_only = cluster::is_loopback_host(http.host);

  Result<http::ShutdownSignal> signal = http::ShutdownSignal::install();
  if (!signal.ok()) return fail("router", signal.message());

  cluster::CellPoolOptions po;
  po.heartbeat_interval = std::chrono::milliseconds(heartbeat_ms);
  po.heartbeat_timeout = std::chrono::milliseconds(heartbeat_timeout_ms);
  po.detector.timeout = std::chrono::milliseconds(dead_after_ms);
  // The service exists only after the pool starts (it routes over the pool): heartbeat
  // callbacks find it through this pointer, null before and after.
  std::atomic<cluster::RouterService*> service_for_callbacks{nullptr};
  po.on_death = [&service_for_callbacks](const std::string& url, std::chrono::nanoseconds d) {
    std::fprintf(stderr, "tokenhive router: cell %s is dead (%.0f ms after its last heartbeat)\n", url.c_str(),
                 std::chrono::duration<double, std::milli>(d).count());
    if (auto* s = service_for_callbacks.load()) s->on_cell_death(url, d);
  };
  po.on_alive = [](const std::string& url) { std::fprintf(stderr, "tokenhive router: cell %s is alive again\n", url.c_str()); };
  auto pool_owner = std::make_unique<cluster::CellPool>(po);
  cluster::CellPool& pool = *pool_owner;
  cluster::RouterService service(ro, pool);
  service_for_callbacks.store(&service);
  if (Status s = service.start(); !s.ok()) return fail("router", s.message());
  for (const std::string& url : cells)
    if (Status s = pool.add(url, cluster::CellSource::kFlag); !s.ok()) return fail("router", s.message());

  std::unique_ptr<cluster::CellWatcher> watcher;
  if (!ro.discovery.empty()) {
    Result<std::unique_ptr<cluster::CellWatcher>> w = cluster::CellWatcher::start(ro.discovery);
    if (!w.ok()) return fail("router", w.message());
    watcher = std::move(*w);
    watcher->on_change([&pool](const std::vector<cluster::DiscoveredCell>& found) {
      std::vector<std::string> urls;
      for (const cluster::DiscoveredCell& c : found) urls.push_back(c.url);
      pool.set_discovered(urls);
    });
  }

  http::HttpServer server(http);
  service.add_routes(server);
  if (Status s = server.start(); !s.ok()) return fail("router", s.message());
  std::fprintf(stderr, "tokenhive router: listening on http://%s:%d (%zu cells given, policy %s%s%s)\n",
               http.host.c_str(), server.port(), cells.size(), ro.policy.c_str(),
               ro.discovery.empty() ? "" : ", discovery ", ro.discovery.c_str());
  const std::string_view admin = cluster::admin_mode(ro);
  if (admin == "refused")
    std::fprintf(stderr, "tokenhive router: admin calls (POST /admin/*) are refused: %s is not loopback and no "
                         "--admin-token is set\n", http.host.c_str());
  else
    std::fprintf(stderr, "tokenhive router: admin calls (POST /admin/*) need %s\n",
                 admin == "token" ? "the admin token" : "a loopback client (no --admin-token; listener is loopback-only)");
  std::fprintf(stderr, "tokenhive router: ready\n");
  if (Status s = sd_notify("READY=1"); !s.ok()) std::fprintf(stderr, "tokenhive router: %s\n", s.message().c_str());

  const int sig = signal->wait();
  std::fprintf(stderr, "tokenhive router: signal %d: draining (up to %.0f s)\n", sig, shutdown_timeout);
  (void)sd_notify("STOPPING=1");
  service.drain();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(shutdown_timeout * 1000));
  while (service.in_flight() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool clean = server.shutdown(std::chrono::milliseconds(1000));
  watcher.reset();
  service.stop();
  service_for_callbacks.store(nullptr);
  pool_owner.reset();  // joins the heartbeat threads while the service they may call still exists
  std::fprintf(stderr, "tokenhive router: stopped%s\n", clean ? "" : " (cut requests that outlived the deadline)");
  return 0;
}

}  // namespace th::cli
