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
#include "cluster/upstream_loop.h"
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

// The longest a proxied request may take, all its tries together (HttpClient's default
// request_timeout, which the thread-per-request router used).
constexpr auto kRequestTimeout = std::chrono::minutes(10);

// One stream of answers from cells for a request: the whole request (choice -1) until its
// first byte went out, or while it is one choice; after that, when its cell fails, one leg
// per unfinished choice, each moved on its own (choice_resume_body).
struct Leg {
  int64_t choice = -1;
  std::atomic<bool> cancel{false};  // this attempt must stop: its cell died, or the request ended
  int attempt = 0;                  // tries, all causes together
  int moves = 0;                    // ... of them after the stream's first byte
  std::set<std::string> excluded;   // cells that failed this leg
  std::string last_error = "no cell is available";
  Clock::time_point wait_until{};   // no cell: the leg waits for one until then
  std::shared_ptr<Cell> cell;       // the attempt in progress: its cell
  std::unique_ptr<CellWork> work;   // ... counted there
  client::SseReader sse;
  std::string sse_error;            // the cell's event stream was malformed
  bool done = false;                // the cell sent [DONE]
};

// One proxied request, from the handler to its last byte. After the handler, its state is
// the upstream loop's alone (every step below runs on that thread, one callback after
// another: no thread waits for a cell); client_gone is set from the HTTP loop.
struct Task {
  ProxyEndpoint endpoint = ProxyEndpoint::kCompletions;
  std::string path;
  std::string body;
  std::vector<client::Header> headers;  // forwarded to the cell
  ResponseWriter writer;
  Clock::time_point received;
  std::atomic<bool> client_gone{false};
  // The loop thread's.
  ProxyRequest q;
  StreamSnapshot snap;
  bool sse_started = false;
  bool ended = false;
  std::vector<std::unique_ptr<Leg>> legs;  // only grows: calls in flight point at their leg
  size_t live_legs = 0;
};

// A cell's answer, passed to the client as it came (its Content-Type, else JSON, and any
// Retry-After).
HttpResponse relay(UpstreamResult r) {
  HttpResponse out;
  out.status = r.status;
  out.set_header("Content-Type", std::string(r.header("content-type").value_or("application/json")));
  if (std::optional<std::string_view> after = r.header("retry-after")) out.set_header("Retry-After", std::string(*after));
  out.body = std::move(r.body);
  return out;
}

HttpResponse relay(client::Response r) {
  UpstreamResult u;
  u.status = r.status;
  u.headers = std::move(r.headers);
  u.body = std::move(r.body);
  return relay(std::move(u));
}

// A cell that is down, broken or draining: another cell may serve the request. Not 429: a
// rate limit is the client's (its key's) on every cell, so it goes back with its
// Retry-After rather than being spread over the cluster (#15).
bool retryable_status(int status) { return status == 500 || status == 502 || status == 503 || status == 504; }

// How a proxied request ends, decided once and sent in one place (Impl::end).
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
  std::unique_ptr<UpstreamLoop> loop;
  std::mutex mu;
  std::deque<std::shared_ptr<Task>> queue;
  std::set<std::shared_ptr<Task>> running;  // for stop(): cancel them
  bool stopping = false;
  std::atomic<bool> draining{false};
  std::atomic<int64_t> in_flight{0};
  std::mt19937_64 rng;  // the loop thread's

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
  // The steps of a request, each on the loop thread.
  void begin(const std::shared_ptr<Task>& t);
  Leg& add_leg(Task& t, int64_t choice);
  void next(const std::shared_ptr<Task>& t, Leg& leg);
  void launch(const std::shared_ptr<Task>& t, Leg& leg, const std::shared_ptr<Cell>& cell);
  bool on_body(Task& t, Leg& leg, std::string_view piece);
  bool on_event(Task& t, Leg& leg, const client::SseEvent& e);
  void after_attempt(const std::shared_ptr<Task>& t, Leg& leg, UpstreamResult r);
  void split(const std::shared_ptr<Task>& t, Leg& whole);
  void leg_finished(const std::shared_ptr<Task>& t);
  // One try's result: the outcome, or nullopt when the leg must try another cell.
  std::optional<Outcome> whole_result(Task& t, Leg& leg, UpstreamResult& r);
  std::optional<Outcome> stream_result(Task& t, Leg& leg, UpstreamResult& r);
  Outcome give_up(Task& t, const Leg& leg);
  void end(const std::shared_ptr<Task>& t, Outcome o);
  static void cell_failed(Leg& leg, std::string why);
  void bad_answer(Leg& leg, const std::string& why);
  // Why a POST /admin/* call is refused (401, 403), or nullopt when it is allowed.
  std::optional<HttpResponse> admin_refusal(const HttpRequest& r) const;
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
    if (auto task = weak.lock()) task->client_gone.store(true);
  });
  bool start = false;
  {
    std::lock_guard<std::mutex> l(mu);
    if (stopping) {
      w.send(error(503, "the router is shutting down", "draining"));
      return;
    }
    if (static_cast<int64_t>(running.size()) < options.workers) {
      running.insert(t);
      start = true;
    } else if (static_cast<int64_t>(queue.size()) >= options.max_queue) {
      w.send(error(503, "the router's queue is full; retry later", "queue_full"));
      return;
    } else {
      queue.push_back(t);
    }
    in_flight.fetch_add(1);
  }
  if (start) loop->post_after(std::chrono::milliseconds(0), [this, t] { begin(t); });
}

void RouterService::Impl::begin(const std::shared_ptr<Task>& t) {
  in_flight_gauge.inc();
  Result<ProxyRequest> inspected = inspect_request(t->endpoint, t->body, rng());
  if (!inspected.ok()) return end(t, Outcome::reply(error(400, inspected.message()), "client_error"));
  t->q = std::move(*inspected);
  t->snap = start_snapshot(t->q);
  next(t, add_leg(*t, -1));
}

Leg& RouterService::Impl::add_leg(Task& t, int64_t choice) {
  t.legs.push_back(std::make_unique<Leg>());
  t.legs.back()->choice = choice;
  ++t.live_legs;
  return *t.legs.back();
}

void RouterService::Impl::next(const std::shared_ptr<Task>& t, Leg& leg) {
  if (t->ended) return;
  if (t->client_gone.load()) return end(t, Outcome::cancelled());
  if (leg.attempt >= options.max_attempts) return end(t, give_up(*t, leg));
  if (std::shared_ptr<Cell> c = pool.pick(*policy, t->q.route, leg.excluded)) return launch(t, leg, c);
  // Every cell is excluded (each failed this leg once) or down: the excluded ones may have
  // come back (a draining cell restarted), so try them again, after a pause that grows
  // with the tries, so that cells answering 429 or 503 are not hammered.
  if (!leg.excluded.empty()) {
    if (std::shared_ptr<Cell> c = pool.pick(*policy, t->q.route, {})) {
      const auto pause = std::min(std::chrono::milliseconds(25 << std::min<size_t>(leg.excluded.size(), 5)),
                                  std::chrono::milliseconds(500));
      loop->post_after(pause, [this, t, l = &leg, c] {
        if (t->ended) return;
        if (t->client_gone.load()) return end(t, Outcome::cancelled());
        launch(t, *l, c);
      });
      return;
    }
  }
  // No eligible cell: wait for one to come back, looking every 20 ms.
  const Clock::time_point now = Clock::now();
  if (leg.wait_until == Clock::time_point{}) leg.wait_until = now + options.wait_for_cell;
  if (now >= leg.wait_until) return end(t, give_up(*t, leg));
  loop->post_after(std::chrono::milliseconds(20), [this, t, l = &leg] { next(t, *l); });
}

void RouterService::Impl::launch(const std::shared_ptr<Task>& t, Leg& leg, const std::shared_ptr<Cell>& cell) {
  leg.wait_until = {};
  if (leg.attempt > 0 || leg.choice >= 0) {  // a choice's own leg starts as a move
    if (t->sse_started) {
      migrations.inc();
      ++leg.moves;
    } else {
      retries.inc();
    }
  }
  ++leg.attempt;
  leg.cancel.store(false);
  leg.work = std::make_unique<CellWork>(cell, t->q.route.priority, t->q.route.cost_tokens / (leg.choice >= 0 ? choice_count(t->q) : 1),
                                        &leg.cancel);
  leg.sse = client::SseReader();
  leg.sse_error.clear();
  leg.done = false;
  leg.cell = cell;
  UpstreamCall c;
  c.target = cell->client().base_url();
  const std::string body = leg.choice < 0 ? resume_body(t->q, t->snap) : choice_resume_body(t->q, t->snap, leg.choice);
  c.wire = upstream_wire(c.target, "POST", t->path, body, t->headers);
  c.cancel = &leg.cancel;
  c.also_cancel = &t->client_gone;
  c.deadline = t->received + kRequestTimeout;
  c.max_body_bytes = kCellAnswerLimits.max_bytes;
  // A killed cell refuses at once and a hung one still completes the handshake (the kernel
  // does it), so only a full listen backlog makes a connect slow: the dropped SYN is sent
  // again after 1 s and 3 s. 3.5 s lets a burst of thousands of new streams through.
  c.connect_timeout = std::chrono::milliseconds(3500);
  if (t->q.stream) c.on_body = [this, t, l = &leg](std::string_view piece) { return on_body(*t, *l, piece); };
  c.on_done = [this, t, l = &leg](UpstreamResult r) { after_attempt(t, *l, std::move(r)); };
  loop->submit(std::move(c));
}

bool RouterService::Impl::on_body(Task& t, Leg& leg, std::string_view piece) {
  Status s = leg.sse.feed(piece, [this, &t, &leg](const client::SseEvent& e) { return on_event(t, leg, e); });
  if (!s.ok()) {
    leg.sse_error = s.message();
    return false;
  }
  return !leg.sse.stopped();
}

bool RouterService::Impl::on_event(Task& t, Leg& leg, const client::SseEvent& e) {
  if (t.ended || t.client_gone.load()) return false;
  if (e.data == "[DONE]") {  // the router sends its own when every leg is done
    leg.done = true;
    return true;
  }
  std::optional<std::string> out = rewrite_chunk(e.data, t.q, t.snap, leg.choice);
  if (!t.snap.invalid.empty()) return false;  // the cell failed: stop reading it
  if (!out) return true;
  if (!t.sse_started) {
    if (!t.writer.start_sse()) return false;
    t.sse_started = true;
    ttft.observe(std::chrono::duration<double>(Clock::now() - t.received).count());
  }
  return t.writer.send_event(*out);
}

void RouterService::Impl::after_attempt(const std::shared_ptr<Task>& t, Leg& leg, UpstreamResult r) {
  leg.work.reset();
  if (t->ended) return;  // another leg ended the request
  std::optional<Outcome> o = t->q.stream ? stream_result(*t, leg, r) : whole_result(*t, leg, r);
  leg.cell.reset();
  if (o) {
    if (o->whole || o->silent || std::string_view(o->label) != "ok") return end(t, std::move(*o));
    return leg_finished(t);
  }
  if (t->client_gone.load()) return end(t, Outcome::cancelled());
  if (!t->sse_started) return next(t, leg);  // nothing went out: the same request elsewhere
  if (!resumable(t->q, t->snap) || leg.moves >= options.max_migrations) return end(t, give_up(*t, leg));
  if (leg.choice < 0 && choice_count(t->q) > 1) return split(t, leg);
  next(t, leg);
}

// The whole request's cell failed after its first byte: each unfinished choice goes on
// alone, on the cells this request has not seen fail.
void RouterService::Impl::split(const std::shared_ptr<Task>& t, Leg& whole) {
  std::vector<Leg*> legs;
  for (int64_t i = 0; i < choice_count(t->q); ++i) {
    if (t->snap.choice(i).finished) continue;
    Leg& leg = add_leg(*t, i);
    leg.excluded = whole.excluded;
    leg.moves = whole.moves;
    leg.last_error = whole.last_error;
    legs.push_back(&leg);
  }
  for (Leg* leg : legs) next(t, *leg);
  leg_finished(t);  // the whole request's leg
}

void RouterService::Impl::leg_finished(const std::shared_ptr<Task>& t) {
  if (--t->live_legs > 0 || t->ended) return;
  std::vector<std::string> last;
  if (std::optional<std::string> usage = usage_chunk(t->q, t->snap)) last.push_back(std::move(*usage));
  if (!t->sse_started) t->sse_started = t->writer.start_sse();  // a stream of [DONE] alone
  end(t, Outcome::stream_end(std::move(last), "ok"));
}

void RouterService::Impl::cell_failed(Leg& leg, std::string why) {
  leg.last_error = cat(leg.cell->url(), ": ", why);
  leg.excluded.insert(leg.cell->url());
}

void RouterService::Impl::bad_answer(Leg& leg, const std::string& why) {
  invalid_answers.inc();
  leg.cell->note_invalid_answer();
  cell_failed(leg, why);
}

std::optional<Outcome> RouterService::Impl::whole_result(Task& t, Leg& leg, UpstreamResult& r) {
  // All or nothing: the client sees no byte until the whole answer, so any failure is
  // a plain retry, and the same seed gives the same answer elsewhere.
  if (t.client_gone.load()) return Outcome::cancelled();
  if (!r.error.ok()) {
    cell_failed(leg, r.error.message());
    return std::nullopt;
  }
  if (retryable_status(r.status)) {
    cell_failed(leg, cat("answered ", r.status));
    return std::nullopt;
  }
  if (Status valid = check_cell_answer(r.status, r.body); !valid.ok()) {
    bad_answer(leg, cat("answered ", valid.message()));
    return std::nullopt;
  }
  const int status = r.status;
  return Outcome::reply(relay(std::move(r)), status < 400 ? "ok" : "client_error");
}

std::optional<Outcome> RouterService::Impl::stream_result(Task& t, Leg& leg, UpstreamResult& r) {
  StreamSnapshot& snap = t.snap;
  if (t.client_gone.load()) return Outcome::cancelled();
  if (!snap.invalid.empty()) {
    bad_answer(leg, cat("sent ", snap.invalid));
    snap.invalid.clear();
  } else if (!r.error.ok() || !leg.sse_error.empty()) {
    cell_failed(leg, r.error.ok() ? leg.sse_error : r.error.message());
  } else if (r.status >= 200 && r.status < 300) {
    if (snap.error_event) return Outcome::stream_end({}, "failed");
    if (leg.done) return Outcome::stream_end({}, "ok");
    cell_failed(leg, "the stream ended before [DONE]");
  } else if (retryable_status(r.status)) {
    cell_failed(leg, cat("answered ", r.status));
  } else if (Status valid = check_cell_answer(r.status, r.body); !valid.ok()) {
    bad_answer(leg, cat("answered ", valid.message()));
  } else if (!t.sse_started) {
    // The cell refused the request itself (400, 401, 404, 429...): that is the client's answer.
    return Outcome::reply(relay(std::move(r)), "client_error");
  } else {
    return Outcome::stream_end({std::move(r.body)}, "client_error");
  }
  // The cell failed: refused, broke, hung (declared dead: cancelled), busy, draining or
  // sent what no cell sends. Between the last finish and [DONE] nothing is missing but the
  // usage chunk, which the router makes (leg_finished).
  const bool finished = leg.choice >= 0 ? snap.choice(leg.choice).finished
                                        : snap.all_finished(static_cast<size_t>(choice_count(t.q)));
  if (finished && t.sse_started) return Outcome::stream_end({}, "ok");
  return std::nullopt;
}

Outcome RouterService::Impl::give_up(Task& t, const Leg& leg) {
  if (t.client_gone.load()) return Outcome::cancelled();
  if (t.sse_started) {
    json err = {{"error", {{"message", cat("the stream could not be continued: ", leg.last_error)},
                           {"type", "server_error"}, {"param", nullptr}, {"code", "cell_failed"}}}};
    return Outcome::stream_end({http::json_text(err)}, "failed");
  }
  HttpResponse out = error(503, cat("no cell could serve this request: ", leg.last_error), "no_cell");
  http::set_retry_after(out, std::chrono::seconds(1));
  return Outcome::reply(std::move(out), "failed");
}

void RouterService::Impl::end(const std::shared_ptr<Task>& t, Outcome o) {
  if (t->ended) return;
  t->ended = true;
  for (const auto& leg : t->legs) leg->cancel.store(true);  // the other legs' calls stop
  // The one place a proxied request's response ends.
  if (!o.silent) {
    if (o.whole) {
      t->writer.send(std::move(*o.whole));
    } else {
      for (const std::string& e : o.events) t->writer.send_event(e);
      t->writer.end();
    }
  }
  requests.with({endpoint_label(t->endpoint), o.label}).inc();
  in_flight_gauge.dec();
  std::shared_ptr<Task> waiting;
  {
    std::lock_guard<std::mutex> l(mu);
    running.erase(t);
    if (!stopping && !queue.empty()) {
      waiting = std::move(queue.front());
      queue.pop_front();
      running.insert(waiting);
    }
  }
  in_flight.fetch_sub(1);
  if (waiting) begin(waiting);
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
  TH_ASSIGN_OR_RETURN(impl_->loop, UpstreamLoop::create());
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
    impl_->stopping = true;
    for (const auto& t : impl_->running) t->client_gone.store(true);
    for (const auto& t : impl_->queue) t->writer.send(error(503, "the router is shutting down", "draining"));
    impl_->queue.clear();
  }
  // Every exchange in flight ends (cancelled) and its request with it; requests waiting on
  // a timer are dropped with it, and their writers end their responses.
  if (impl_->loop) impl_->loop->stop();
}

int64_t RouterService::in_flight() const { return impl_->in_flight.load(); }

void RouterService::on_cell_death(const std::string& url, std::chrono::nanoseconds d) {
  (void)url;
  impl_->deaths.inc();
  impl_->detection.observe(std::chrono::duration<double>(d).count());
}

}  // namespace th::cluster
