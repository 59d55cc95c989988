#include "cluster/router_service.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/bounded_json.h"
#include "cluster/cluster_view.h"
#include "cluster/proxy_request.h"
#include "http/bearer.h"
#include "http/http_response.h"
#include "http/http_server.h"
#include "http/metrics.h"

namespace th::cluster {

namespace {

using json = nlohmann::ordered_json;

using http::ApiError;
using http::HttpRequest;
using http::HttpResponse;
using http::ResponseWriter;

HttpResponse error(int status, std::string message, std::string code = {}) {
  return http::error_response(status, ApiError{std::move(message), "", std::nullopt,
                                                 code.empty() ? std::nullopt : std::optional<std::string>(code)});
}

// One proxied request, from the handler to its last byte.
struct Task {
  ProxyEndpoint endpoint = ProxyEndpoint::kCompletions;
  std::string path;
  std::string body;
  std::vector<client::Header> headers;  // forwarded to the cell
  ResponseWriter writer;
  Clock::time_point received;
  std::atomic<bool> cancel{false};       // this attempt must stop: the cell died, or the client left
  std::atomic<bool> client_gone{false};
};

// A cell's answer, passed to the client as it came (its Content-Type, else JSON, and any
// Retry-After).
HttpResponse relay(client::Response r) {
  HttpResponse out;
  out.status = r.status;
  out.set_header("Content-Type", std::string(r.header("content-type").value_or("application/json")));
  if (std::optional<std::string_view> after = r.header("retry-after")) out.set_header("Retry-After", std::string(*after));
  out.body = std::move(r.body);
  return out;
}

// A cell that is down, broken or draining: another cell may serve the request. Not 429: a
// rate limit is the client's (its key's) on every cell, so it goes back with its
// Retry-After rather than being spread over the cluster (#15).
bool retryable_status(int status) { return status == 500 || status == 502 || status == 503 || status == 504; }

// How a proxied request ends, decided once (Impl::route) and sent in one place (Impl::proxy).
struct Outcome {
  const char* label = "ok";           // the metrics' outcome: ok, client_error, failed, cancelled
  bool silent = false;                // the client left: nothing to send
  std::optional<HttpResponse> whole;  // an answer sent whole (no byte of the stream went out)
  std::vector<std::string> events;    // else: the stream's last events, [DONE] included

  static Outcome reply(HttpResponse r, const char* label) {
    Outcome o;
    o.label = label;
    o.whole = std::move(r);
    return o;
  }
  static Outcome stream_end(std::vector<std::string> events, const char* label) {
    Outcome o;
    o.label = label;
    o.events = std::move(events);
    o.events.emplace_back("[DONE]");
    return o;
  }
  static Outcome cancelled() {
    Outcome o;
    o.label = "cancelled";
    o.silent = true;
    return o;
  }
};

// What one request's tries share.
struct Attempts {
  StreamSnapshot snap;
  bool sse_started = false;
  std::set<std::string> excluded;  // cells that failed this request
  int moves = 0;
  std::string last_error = "no cell is available";
};

}  // namespace

struct RouterService::Impl : std::enable_shared_from_this<RouterService::Impl> {
  Impl(RouterServiceOptions o, CellPool& p)
      : options(std::move(o)),
        pool(p),
        rng(std::random_device{}()),
        requests(metrics.counter("tokenhive_router_requests_total", "Requests the router finished, by endpoint and outcome.",
                                 {"endpoint", "outcome"})),
        migrations(metrics.counter("tokenhive_router_migrations_total",
                                   "Streams moved to another cell after their cell failed mid-stream.")
                       .with()),
        retries(metrics.counter("tokenhive_router_retries_total",
                                "Requests sent again to another cell before any byte reached the client.")
                    .with()),
        invalid_answers(metrics.counter("tokenhive_router_invalid_answers_total",
                                        "Cell answers not passed on: a status outside 200-599, a body or chunk "
                                        "that is not JSON, or is too deep or big to read.")
                            .with()),
        deaths(metrics.counter("tokenhive_router_cell_deaths_total", "Cells declared dead.").with()),
        detection(metrics.histogram("tokenhive_router_failure_detection_seconds",
                                    "From a cell's last answered heartbeat to its being declared dead.",
                                    {0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.75, 1.0, 2.0})
                      .with()),
        ttft(metrics.histogram("tokenhive_router_time_to_first_chunk_seconds",
                               "From a streaming request's arrival to its first chunk sent to the client.",
                               {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10})
                 .with()),
        in_flight_gauge(metrics.gauge("tokenhive_router_requests_in_flight", "Requests being proxied.").with()),
        cells_gauge(metrics.gauge("tokenhive_router_cells", "Cells known, by state.", {"state"})) {}

  RouterServiceOptions options;
  CellPool& pool;
  std::unique_ptr<RoutingPolicy> policy;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Task>> queue;
  std::set<std::shared_ptr<Task>> running;  // for stop(): cancel them
  bool stopping = false;
  std::atomic<bool> draining{false};
  std::atomic<int64_t> in_flight{0};
  std::vector<std::thread> workers;
  std::mutex rng_mu;
  std::mt19937_64 rng;

  http::MetricsRegistry metrics;
  http::CounterFamily& requests;
  http::Counter& migrations;
  http::Counter& retries;
  http::Counter& invalid_answers;
  http::Counter& deaths;
  http::Histogram& detection;
  http::Histogram& ttft;
  http::Gauge& in_flight_gauge;
  http::GaugeFamily& cells_gauge;

  void enqueue(ProxyEndpoint endpoint, const HttpRequest& r, ResponseWriter w);
  void work();
  void proxy(Task& t);
  Outcome route(Task& t, const ProxyRequest& q);
  // One try on `cell`: the outcome, or nullopt when the next cell must be tried.
  std::optional<Outcome> try_whole(Task& t, const ProxyRequest& q, Cell& cell, Attempts& a);
  std::optional<Outcome> try_stream(Task& t, const ProxyRequest& q, Cell& cell, Attempts& a);
  static void cell_failed(Cell& cell, Attempts& a, std::string why);
  void finish(const Task& t, const char* outcome) { requests.with({endpoint_label(t.endpoint), outcome}).inc(); }
  // Why a POST /admin/* call is refused (401, 403), or nullopt when it is allowed.
  std::optional<HttpResponse> admin_refusal(const HttpRequest& r) const;
  std::shared_ptr<Cell> wait_for_cell(const RouteRequest& rr, const std::set<std::string>& excluded, const Task& t);
};

void RouterService::Impl::enqueue(ProxyEndpoint endpoint, const HttpRequest& r, ResponseWriter w) {
  if (draining.load()) {
    w.send(error(503, "the router is shutting down", "draining"));
    return;
  }
  auto t = std::make_shared<Task>();
  t->endpoint = endpoint;
  t->path = r.path;
  t->body = r.body;
  if (auto a = r.header("authorization")) t->headers.push_back({"Authorization", std::string(*a)});
  t->writer = w;
  t->received = Clock::now();
  std::weak_ptr<Task> weak = t;
  w.on_close([weak] {
    if (auto task = weak.lock()) {
      task->client_gone.store(true);
      task->cancel.store(true);
    }
  });
  {
    std::lock_guard<std::mutex> l(mu);
    if (static_cast<int64_t>(queue.size()) >= options.max_queue) {
      w.send(error(503, "the router's queue is full; retry later", "queue_full"));
      return;
    }
    queue.push_back(std::move(t));
    in_flight.fetch_add(1);
  }
  cv.notify_one();
}

void RouterService::Impl::work() {
  for (;;) {
    std::shared_ptr<Task> t;
    {
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return stopping || !queue.empty(); });
      if (stopping) return;
      t = std::move(queue.front());
      queue.pop_front();
      running.insert(t);
    }
    in_flight_gauge.inc();
    proxy(*t);
    in_flight_gauge.dec();
    {
      std::lock_guard<std::mutex> l(mu);
      running.erase(t);
    }
    in_flight.fetch_sub(1);
  }
}

std::shared_ptr<Cell> RouterService::Impl::wait_for_cell(const RouteRequest& rr, const std::set<std::string>& excluded,
                                                         const Task& t) {
  const Clock::time_point until = Clock::now() + options.wait_for_cell;
  for (;;) {
    if (std::shared_ptr<Cell> c = pool.pick(*policy, rr, excluded)) return c;
    // Every cell is excluded (each failed this request once) or down: the excluded ones
    // may have come back (a draining cell restarted), so try them again before waiting.
    if (!excluded.empty()) {
      if (std::shared_ptr<Cell> c = pool.pick(*policy, rr, {})) {
        // ... after a pause that grows with the tries, so that cells answering 429 or 503
        // are not hammered.
        std::this_thread::sleep_for(std::min(std::chrono::milliseconds(25 << std::min<size_t>(excluded.size(), 5)),
                                             std::chrono::milliseconds(500)));
        return c;
      }
    }
    if (Clock::now() >= until || t.client_gone.load()) return nullptr;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void RouterService::Impl::proxy(Task& t) {
  uint64_t seed;
  {
    std::lock_guard<std::mutex> l(rng_mu);
    seed = rng();
  }
  Result<ProxyRequest> inspected = inspect_request(t.endpoint, t.body, seed);
  Outcome o = inspected.ok() ? route(t, *inspected) : Outcome::reply(error(400, inspected.message()), "client_error");
  // The one place a proxied request's response ends.
  if (!o.silent) {
    if (o.whole) {
      t.writer.send(std::move(*o.whole));
    } else {
      for (const std::string& e : o.events) t.writer.send_event(e);
      t.writer.end();
    }
  }
  finish(t, o.label);
}

Outcome RouterService::Impl::route(Task& t, const ProxyRequest& q) {
  Attempts a;
  a.snap = start_snapshot(q);
  for (int attempt = 0; attempt < options.max_attempts; ++attempt) {
    if (t.client_gone.load()) break;
    std::shared_ptr<Cell> cell = wait_for_cell(q.route, a.excluded, t);
    if (!cell) break;
    if (attempt > 0) {
      if (a.sse_started) {
        migrations.inc();
        ++a.moves;
      } else {
        retries.inc();
      }
    }
    t.cancel.store(t.client_gone.load());
    CellWork work(cell, q.route.priority, q.route.cost_tokens, &t.cancel);
    std::optional<Outcome> o = q.stream ? try_stream(t, q, *cell, a) : try_whole(t, q, *cell, a);
    if (o) return std::move(*o);
    if (t.client_gone.load()) break;
    if (a.sse_started && (!resumable(q, a.snap) || a.moves >= options.max_migrations)) break;
  }
  if (t.client_gone.load()) return Outcome::cancelled();
  if (a.sse_started) {
    json err = {{"error", {{"message", cat("the stream could not be continued: ", a.last_error)},
                           {"type", "server_error"}, {"param", nullptr}, {"code", "cell_failed"}}}};
    return Outcome::stream_end({http::json_text(err)}, "failed");
  }
  HttpResponse out = error(503, cat("no cell could serve this request: ", a.last_error), "no_cell");
  http::set_retry_after(out, std::chrono::seconds(1));
  return Outcome::reply(std::move(out), "failed");
}

void RouterService::Impl::cell_failed(Cell& cell, Attempts& a, std::string why) {
  a.last_error = cat(cell.url(), ": ", why);
  a.excluded.insert(cell.url());
}

std::optional<Outcome> RouterService::Impl::try_whole(Task& t, const ProxyRequest& q, Cell& cell, Attempts& a) {
  // All or nothing: the client sees no byte until the whole answer, so any failure is
  // a plain retry, and the same seed gives the same answer elsewhere.
  Result<client::Response> r = cell.client().request("POST", t.path, resume_body(q, a.snap), t.headers, &t.cancel);
  if (t.client_gone.load()) return Outcome::cancelled();
  if (!r.ok()) {
    cell_failed(cell, a, r.message());
    return std::nullopt;
  }
  if (retryable_status(r->status)) {
    cell_failed(cell, a, cat("answered ", r->status));
    return std::nullopt;
  }
  if (Status valid = check_cell_answer(r->status, r->body); !valid.ok()) {
    invalid_answers.inc();
    cell.note_invalid_answer();
    cell_failed(cell, a, cat("answered ", valid.message()));
    return std::nullopt;
  }
  const int status = r->status;
  return Outcome::reply(relay(std::move(*r)), status < 400 ? "ok" : "client_error");
}

std::optional<Outcome> RouterService::Impl::try_stream(Task& t, const ProxyRequest& q, Cell& cell, Attempts& a) {
  StreamSnapshot& snap = a.snap;
  auto on_event = [&](const client::SseEvent& e) -> bool {
    if (t.client_gone.load()) return false;
    std::optional<std::string> out = rewrite_chunk(e.data, q, snap);
    if (!snap.invalid.empty()) return false;  // the cell failed: stop reading it
    if (!out) return true;
    if (!a.sse_started) {
      if (!t.writer.start_sse()) return false;
      a.sse_started = true;
      ttft.observe(std::chrono::duration<double>(Clock::now() - t.received).count());
    }
    return t.writer.send_event(*out);
  };
  Result<client::Response> r =
      cell.client().stream_events("POST", t.path, resume_body(q, snap), on_event, t.headers, &t.cancel);
  if (t.client_gone.load()) return Outcome::cancelled();
  if (!snap.invalid.empty()) {
    invalid_answers.inc();
    cell.note_invalid_answer();
    cell_failed(cell, a, cat("sent ", snap.invalid));
    snap.invalid.clear();
  } else if (!r.ok()) {
    cell_failed(cell, a, r.message());
  } else if (r->status >= 200 && r->status < 300) {
    if (snap.done || snap.upstream_error) {
      if (!a.sse_started) a.sse_started = t.writer.start_sse();  // a stream of [DONE] alone
      return Outcome::stream_end({}, snap.upstream_error ? "failed" : "ok");
    }
    cell_failed(cell, a, "the stream ended before [DONE]");
  } else if (retryable_status(r->status)) {
    cell_failed(cell, a, cat("answered ", r->status));
  } else if (Status valid = check_cell_answer(r->status, r->body); !valid.ok()) {
    invalid_answers.inc();
    cell.note_invalid_answer();
    cell_failed(cell, a, cat("answered ", valid.message()));
  } else if (!a.sse_started) {
    // The cell refused the request itself (400, 401, 404, 429...): that is the client's answer.
    return Outcome::reply(relay(std::move(*r)), "client_error");
  } else {
    return Outcome::stream_end({std::move(r->body)}, "client_error");
  }
  // The cell failed: refused, broke, hung (declared dead: cancelled), busy, draining or
  // sent what no cell sends.
  if (snap.finished) return Outcome::stream_end({}, "ok");  // between the last token and [DONE]: nothing is missing
  return std::nullopt;
}

std::optional<HttpResponse> RouterService::Impl::admin_refusal(const HttpRequest& r) const {
  if (!options.admin_token.empty()) {
    if (http::bearer_matches(r.header("authorization"), options.admin_token)) return std::nullopt;
    return error(401, "admin endpoints need Authorization: Bearer <admin token>", "admin_forbidden");
  }
  if (options.admin_loopback_only) return std::nullopt;
  return error(403,
               "admin endpoints are off: the router listens beyond loopback and has no admin token; start it with "
               "--admin-token (or $TOKENHIVE_ADMIN_TOKEN), or listen on 127.0.0.1",
               "admin_forbidden");
}

bool is_loopback_host(std::string_view host) {
  if (host == "localhost") return true;
  const std::string h(host);
  in_addr v4{};
  if (::inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, h.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

std::string_view admin_mode(const RouterServiceOptions& options) {
  if (!options.admin_token.empty()) return "token";
  return options.admin_loopback_only ? "loopback" : "refused";
}

RouterService::RouterService(RouterServiceOptions options, CellPool& pool)
    : impl_(std::make_shared<Impl>(std::move(options), pool)) {}

RouterService::~RouterService() { stop(); }

Status RouterService::start() {
  TH_ASSIGN_OR_RETURN(impl_->policy, make_routing_policy(impl_->options.policy, PolicyOptions{}));
  if (impl_->options.workers < 1) return Status::error("workers must be at least 1");
  for (int i = 0; i < impl_->options.workers; ++i) {
    impl_->workers.emplace_back([impl = impl_.get()] {
      pthread_setname_np(pthread_self(), "th-proxy");
      impl->work();
    });
  }
  return ok_status();
}

void RouterService::add_routes(http::HttpServer& server) {
  std::shared_ptr<Impl> impl = impl_;
  const std::pair<const char*, ProxyEndpoint> endpoints[] = {{"/v1/completions", ProxyEndpoint::kCompletions},
                                                             {"/v1/chat/completions", ProxyEndpoint::kChat},
                                                             {"/v1/generate", ProxyEndpoint::kGenerate}};
  for (const auto& entry : endpoints) {
    const ProxyEndpoint ep = entry.second;
    server.route("POST", entry.first, [impl, ep](const HttpRequest& r, ResponseWriter w) { impl->enqueue(ep, r, std::move(w)); });
  }
  server.route("GET", "/health", [](const HttpRequest&, ResponseWriter w) {
    w.send(http::json_response(200, nlohmann::json{{"status", "ok"}}));
  });
  server.route("GET", "/ready", [impl](const HttpRequest&, ResponseWriter w) {
    const size_t live = impl->pool.eligible_count();
    const bool ready = live > 0 && !impl->draining.load();
    w.send(http::json_response(ready ? 200 : 503, nlohmann::json{{"status", ready ? "ready" : "no_cell"}, {"cells", live}}));
  });
  server.route("GET", "/metrics", [impl](const HttpRequest&, ResponseWriter w) {
    int64_t alive = 0, dead = 0, unknown = 0, draining = 0;
    for (const auto& c : impl->pool.cells()) {
      const CellHealth h = c->health();
      if (h == CellHealth::kDead) ++dead;
      else if (h == CellHealth::kUnknown) ++unknown;
      else if (c->eligible()) ++alive;
      else ++draining;
    }
    impl->cells_gauge.with({"alive"}).set(static_cast<double>(alive));
    impl->cells_gauge.with({"dead"}).set(static_cast<double>(dead));
    impl->cells_gauge.with({"unknown"}).set(static_cast<double>(unknown));
    impl->cells_gauge.with({"draining"}).set(static_cast<double>(draining));
    w.send(http::text_response(200, impl->metrics.render(), "text/plain; version=0.0.4; charset=utf-8"));
  });
  auto models = [impl](const HttpRequest& r, ResponseWriter w) {
    std::shared_ptr<Cell> cell = impl->pool.any_eligible();
    if (!cell) {
      w.send(error(503, "no cell is available", "no_cell"));
      return;
    }
    // A short GET, answered from the event loop's thread would block it: a worker does it.
    std::vector<client::Header> headers;
    if (auto a = r.header("authorization")) headers.push_back({"Authorization", std::string(*a)});
    std::thread([cell, path = r.path, headers, w] {
      Result<client::Response> resp = cell->client().request("GET", path, {}, headers);
      if (!resp.ok()) {
        w.send(error(502, cat(cell->url(), ": ", resp.message()), "cell_failed"));
        return;
      }
      if (Status valid = check_cell_answer(resp->status, resp->body); !valid.ok()) {
        w.send(error(502, cat(cell->url(), " answered ", valid.message()), "cell_failed"));
        return;
      }
      w.send(relay(std::move(*resp)));
    }).detach();
  };
  server.route("GET", "/v1/models", models);
  server.route("GET", "/v1/models/*", models);
  add_cluster_view_routes(server);
  server.route("GET", "/admin/cells", [impl](const HttpRequest&, ResponseWriter w) {
    nlohmann::json cells = nlohmann::json::array();
    for (const auto& c : impl->pool.cells()) cells.push_back(c->describe());
    w.send(http::json_response(200, nlohmann::json{{"cells", cells}, {"policy", impl->options.policy}}));
  });
  auto admin_url = [impl](const HttpRequest& r, ResponseWriter& w) -> std::optional<std::string> {
    if (std::optional<HttpResponse> refused = impl->admin_refusal(r)) {
      w.send(std::move(*refused));
      return std::nullopt;
    }
    Result<nlohmann::json> parsed = parse_json_bounded(r.body, kControlLimits);
    const nlohmann::json j = parsed.ok() ? std::move(*parsed) : nlohmann::json();
    if (!j.is_object() || !j.contains("url") || !j["url"].is_string()) {
      w.send(error(400, "the body must be {\"url\": \"http://host:port\"}"));
      return std::nullopt;
    }
    return j["url"].get<std::string>();
  };
  server.route("POST", "/admin/cells", [impl, admin_url](const HttpRequest& r, ResponseWriter w) {
    std::optional<std::string> url = admin_url(r, w);
    if (!url) return;
    if (!impl->options.discovery.empty()) {
      // The cell registers itself on etcd under its own lease: no router holds it, so
      // losing this router loses no registration.
      w.send(http::json_response(200, nlohmann::json{{"url", *url}, {"discovery", impl->options.discovery}}));
      return;
    }
    if (Status s = impl->pool.add(*url, CellSource::kJoin); !s.ok()) {
      w.send(error(400, s.message()));
      return;
    }
    w.send(http::json_response(200, nlohmann::json{{"url", *url}, {"discovery", nullptr}}));
  });
  server.route("POST", "/admin/cells/leave", [impl, admin_url](const HttpRequest& r, ResponseWriter w) {
    std::optional<std::string> url = admin_url(r, w);
    if (!url) return;
    impl->pool.remove(*url);
    w.send(http::json_response(200, nlohmann::json{{"url", *url}, {"left", true}}));
  });
}

void RouterService::drain() { impl_->draining.store(true); }

void RouterService::stop() {
  {
    std::lock_guard<std::mutex> l(impl_->mu);
    if (impl_->stopping && impl_->workers.empty()) return;
    impl_->stopping = true;
    for (const auto& t : impl_->running) {
      t->client_gone.store(true);
      t->cancel.store(true);
    }
    for (const auto& t : impl_->queue) t->writer.send(error(503, "the router is shutting down", "draining"));
    impl_->queue.clear();
  }
  impl_->cv.notify_all();
  for (std::thread& w : impl_->workers) w.join();
  impl_->workers.clear();
}

int64_t RouterService::in_flight() const { return impl_->in_flight.load(); }

void RouterService::on_cell_death(const std::string& url, std::chrono::nanoseconds d) {
  (void)url;
  impl_->deaths.inc();
  impl_->detection.observe(std::chrono::duration<double>(d).count());
}

}  // namespace th::cluster
