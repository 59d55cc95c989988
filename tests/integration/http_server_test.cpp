// A real HttpServer on 127.0.0.1 (an ephemeral port) inside the test process,
// driven by real sockets (http_test_client.h) and by curl. Every wait is
// bounded: a hang fails the test, it does not stall the run.
#include "http/http_server.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "http_test_client.h"
#include "run_process.h"
#include "http/http_response.h"
#include "http/shutdown_signal.h"
#include "test_util.h"

namespace th::http {
namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;
using Clock = std::chrono::steady_clock;
using test::TestConnection;

const char* const kCurl = "/usr/bin/curl";

bool have_curl() { return ::access(kCurl, X_OK) == 0; }

// Polls `cond` every 5 ms until it holds or `limit` passes.
bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds limit = 5s) {
  const auto until = Clock::now() + limit;
  while (!cond()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

std::string get(std::string_view path, std::string_view extra_headers = "") {
  return "GET " + std::string(path) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + std::string(extra_headers) + "\r\n";
}

std::string post(std::string_view path, std::string_view body) {
  return "POST " + std::string(path) + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

class HttpServerTest : public ::testing::Test {
 protected:
  ~HttpServerTest() override {
    stop_producers_ = true;
    // The server first: its loops are what spawn producers. Producers
    // outliving it are fine: their writes just fail.
    server_.reset();
    std::lock_guard<std::mutex> lock(producers_mu_);
    for (auto& t : producers_) t.join();
  }

  // Starts a server with the common routes plus `extra` ones.
  void start(HttpServerOptions options = {}, const std::function<void(HttpServer&)>& extra = nullptr) {
    options.host = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<HttpServer>(options);
    HttpServer& s = *server_;
    s.route("GET", "/hello", [](const HttpRequest&, ResponseWriter w) { w.send(text_response(200, "hello")); });
    s.route("POST", "/echo", [](const HttpRequest& r, ResponseWriter w) { w.send(text_response(200, r.body)); });
    s.route("GET", "/json", [](const HttpRequest& r, ResponseWriter w) {
      w.send(json_response(200, {{"id", r.id}, {"path", r.path}, {"query", r.query}}));
    });
    // Five events from another thread, 20 ms apart, as the engine would stream tokens.
    s.route("GET", "/sse", [this](const HttpRequest&, ResponseWriter w) {
      w.start_sse();
      spawn([w] {
        for (int i = 0; i < 5; ++i) {
          std::this_thread::sleep_for(20ms);
          if (!w.send_event("event " + std::to_string(i))) return;
        }
        w.end();
      });
    });
    // A stream that goes on until the client leaves (or the test ends).
    s.route("GET", "/forever", [this](const HttpRequest&, ResponseWriter w) {
      w.on_close([this] {
        closed_at_ = Clock::now();
        on_close_calls_.fetch_add(1);
      });
      w.start_sse();
      spawn([this, w] {
        while (!stop_producers_ && w.send_event("tick")) std::this_thread::sleep_for(10ms);
      });
    });
    s.route("GET", "/drop", [](const HttpRequest&, ResponseWriter) {});
    s.route("GET", "/throw", [](const HttpRequest&, ResponseWriter) { throw std::runtime_error("boom"); });
    if (extra) extra(s);
    const Status st = s.start();
    ASSERT_TRUE(st.ok()) << st.message();
    port_ = s.port();
    ASSERT_GT(port_, 0);
  }

  void spawn(std::function<void()> f) {
    std::lock_guard<std::mutex> lock(producers_mu_);
    producers_.emplace_back(std::move(f));
  }

  std::string url(std::string_view path) const { return "http://127.0.0.1:" + std::to_string(port_) + std::string(path); }

  // One request on a fresh connection.
  std::optional<test::HttpReply> fetch(const std::string& request) {
    TestConnection c(port_);
    if (!c.connected() || !c.send(request)) return std::nullopt;
    return c.read_response();
  }

  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  std::atomic<bool> stop_producers_{false};
  std::atomic<int> on_close_calls_{0};
  std::atomic<Clock::time_point> closed_at_{};
  std::mutex producers_mu_;
  std::vector<std::thread> producers_;
};

TEST_F(HttpServerTest, GetAndPostOverRawSockets) {
  start();
  auto r = fetch(get("/hello"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello");
  EXPECT_EQ(r->header("content-type"), "text/plain; charset=utf-8");
  EXPECT_FALSE(r->header("x-request-id").empty());
  EXPECT_FALSE(r->header("date").empty());

  const std::string body(100'000, 'b');  // more than one read
  r = fetch(post("/echo", body));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, body);

  r = fetch(get("/json?a=1"));
  ASSERT_TRUE(r);
  const auto j = nlohmann::json::parse(r->body);
  EXPECT_EQ(j["path"], "/json");
  EXPECT_EQ(j["query"], "a=1");
  EXPECT_EQ(j["id"], r->header("x-request-id"));
}

TEST_F(HttpServerTest, KeepAliveCarriesManyRequestsOnOneConnection) {
  start();
  TestConnection c(port_);
  ASSERT_TRUE(c.connected());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(c.send(post("/echo", "n" + std::to_string(i))));
    auto r = c.read_response();
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->body, "n" + std::to_string(i));
    EXPECT_FALSE(r->has_header("connection"));
  }
  // Pipelined: three requests in one write, answered in order.
  ASSERT_TRUE(c.send(get("/hello") + post("/echo", "second") + get("/json")));
  auto a = c.read_response(), b = c.read_response(), d = c.read_response();
  ASSERT_TRUE(a && b && d);
  EXPECT_EQ(a->body, "hello");
  EXPECT_EQ(b->body, "second");
  EXPECT_EQ(nlohmann::json::parse(d->body)["path"], "/json");
  // Connection: close is honoured.
  ASSERT_TRUE(c.send(get("/hello", "Connection: close\r\n")));
  auto last = c.read_response();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->header("connection"), "close");
  EXPECT_TRUE(c.wait_closed());
  EXPECT_EQ(server_->stats().accepted, 1u);
  EXPECT_EQ(server_->stats().requests, 9u);
}

TEST_F(HttpServerTest, UnknownRouteIs404AndWrongMethodIs405WithAllow) {
  start({}, [](HttpServer& s) {
    s.route("PUT", "/hello", [](const HttpRequest&, ResponseWriter w) { w.send(text_response(200, "put")); });
    s.route("GET", "/v1/models/*", [](const HttpRequest& r, ResponseWriter w) { w.send(text_response(200, r.path)); });
  });
  auto r = fetch(get("/nope"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  const auto err = nlohmann::json::parse(r->body)["error"];
  EXPECT_EQ(err["type"], "not_found_error");
  EXPECT_TRUE(err["message"].get<std::string>().find("/nope") != std::string::npos);
  EXPECT_TRUE(err.contains("param") && err["param"].is_null());
  EXPECT_TRUE(err.contains("code") && err["code"].is_null());

  r = fetch("DELETE /hello HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->header("allow"), "GET, PUT");

  r = fetch(get("/v1/models/stories260K"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "/v1/models/stories260K");
}

TEST_F(HttpServerTest, CurlGetPostAndKeepAlive) {
  if (!have_curl()) GTEST_SKIP() << "no " << kCurl;
  start();
  auto r = test::run_process({kCurl, "-sS", "-i", url("/hello")}, 30);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("HTTP/1.1 200 OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\r\n\r\nhello"), std::string::npos) << r.out;

  r = test::run_process({kCurl, "-sS", "--data-binary", "some body", url("/echo")}, 30);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "some body");

  // Three URLs in one curl: one connection, reused.
  const uint64_t before = server_->stats().accepted;
  r = test::run_process({kCurl, "-sS", url("/hello"), url("/hello"), url("/hello")}, 30);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hellohellohello");
  EXPECT_EQ(server_->stats().accepted - before, 1u);
}

TEST_F(HttpServerTest, SseStreamFromAnotherThreadWithCurl) {
  if (!have_curl()) GTEST_SKIP() << "no " << kCurl;
  start();
  auto r = test::run_process({kCurl, "-sS", "-N", "-i", url("/sse")}, 30);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Content-Type: text/event-stream"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Transfer-Encoding: chunked"), std::string::npos) << r.out;
  const size_t body = r.out.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos);
  EXPECT_EQ(r.out.substr(body + 4),
            "data: event 0\n\ndata: event 1\n\ndata: event 2\n\ndata: event 3\n\ndata: event 4\n\n");
}

TEST_F(HttpServerTest, FullResponseLaterFromAnotherThread) {
  start({}, [this](HttpServer& s) {
    s.route("POST", "/later", [this](const HttpRequest& r, ResponseWriter w) {
      spawn([w, body = r.body] {
        std::this_thread::sleep_for(50ms);
        w.send(json_response(200, {{"got", body}, {"id", w.request_id()}}));
      });
    });
  });
  TestConnection c(port_);
  for (const std::string body : {"x0", "x1", "x2"}) {
    ASSERT_TRUE(c.send(post("/later", body)));
    auto r = c.read_response();
    ASSERT_TRUE(r);
    const auto j = nlohmann::json::parse(r->body);
    EXPECT_EQ(j["got"], body);
    EXPECT_EQ(j["id"], r->header("x-request-id"));
  }
}

TEST_F(HttpServerTest, ManyConcurrentStreamsFromOtherThreads) {
  start();
  constexpr int kClients = 32;
  std::atomic<int> complete{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&] {
      TestConnection c(port_);
      for (int round = 0; round < 2; ++round) {  // the second on the same connection
        if (!c.send(get("/sse"))) return;
        auto r = c.read_response();
        if (r && r->body == "data: event 0\n\ndata: event 1\n\ndata: event 2\n\ndata: event 3\n\ndata: event 4\n\n")
          complete.fetch_add(1);
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(complete.load(), 2 * kClients);
  EXPECT_EQ(server_->stats().accepted, static_cast<uint64_t>(kClients));
  EXPECT_TRUE(eventually([&] { return server_->stats().in_flight == 0; }));
}

TEST_F(HttpServerTest, SseOverRawSocketAndMultiLineEvents) {
  start({}, [](HttpServer& s) {
    s.route("GET", "/lines", [](const HttpRequest&, ResponseWriter w) {
      w.start_sse();
      w.send_event("a\nb\r\nc");
      w.send_event("");
      w.end();
      EXPECT_FALSE(w.send_event("after end"));
    });
  });
  auto r = fetch(get("/lines"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "data: a\ndata: b\ndata: c\n\ndata: \n\n");
}

TEST_F(HttpServerTest, ClientDisconnectMidStreamFiresOnClose) {
  start();
  TestConnection c(port_);
  ASSERT_TRUE(c.send(get("/forever")));
  ASSERT_TRUE(c.read_until("data: tick\n\n"));
  EXPECT_EQ(on_close_calls_.load(), 0);
  const auto t0 = Clock::now();
  c.close();
  ASSERT_TRUE(eventually([&] { return on_close_calls_.load() == 1; }, 5s));
  const auto took = closed_at_.load() - t0;
  EXPECT_LT(took, 2s) << std::chrono::duration<double>(took).count() << " s";
  EXPECT_TRUE(eventually([&] { return server_->stats().in_flight == 0 && server_->stats().open_connections == 0; }));
}

TEST_F(HttpServerTest, SlowHeadersGet408AndClose) {
  HttpServerOptions o;
  o.header_timeout = 300ms;
  start(o);
  TestConnection c(port_);
  const auto t0 = Clock::now();
  ASSERT_TRUE(c.send("GET /hello HTTP/1.1\r\nHost: h\r\nX-Slow:"));  // and never the rest
  auto r = c.read_response();
  const auto took = Clock::now() - t0;
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 408);
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_TRUE(c.wait_closed());
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 3s);

  // A connection that never sends a byte is closed without a word.
  TestConnection silent(port_);
  ASSERT_TRUE(silent.connected());
  EXPECT_TRUE(silent.wait_closed());
  EXPECT_EQ(silent.buffered(), "");
  EXPECT_EQ(server_->stats().timeouts, 1u);
}

TEST_F(HttpServerTest, SlowBodyGets408) {
  HttpServerOptions o;
  o.body_timeout = 300ms;
  start(o);
  TestConnection c(port_);
  ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc"));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 408);
  EXPECT_TRUE(c.wait_closed());
}

TEST_F(HttpServerTest, ThousandIdleConnectionsAndOthersStillServedPromptly) {
  // 1,000 client sockets and 1,000 server sockets in this one process.
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < 2200 && lim.rlim_max >= 2200) {
    lim.rlim_cur = std::min<rlim_t>(lim.rlim_max, 4096);
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
  if (lim.rlim_cur < 2200) GTEST_SKIP() << "RLIMIT_NOFILE " << lim.rlim_cur << " is too low";
  HttpServerOptions o;
  o.header_timeout = 60s;
  o.idle_timeout = 60s;
  start(o);
  constexpr int kIdle = 1000;
  std::vector<std::unique_ptr<TestConnection>> idle;
  for (int i = 0; i < kIdle; ++i) {
    idle.push_back(std::make_unique<TestConnection>(port_));
    ASSERT_TRUE(idle.back()->connected()) << i;
  }
  // Half of them also went through a request and sit in keep-alive.
  for (int i = 0; i < kIdle; i += 2) {
    ASSERT_TRUE(idle[i]->send(get("/hello")));
    auto r = idle[i]->read_response();
    ASSERT_TRUE(r) << i;
  }
  ASSERT_TRUE(eventually([&] { return server_->stats().open_connections == kIdle; }, 10s))
      << server_->stats().open_connections;
  for (int round = 0; round < 5; ++round) {
    const auto t0 = Clock::now();
    auto r = fetch(get("/hello"));
    const auto took = Clock::now() - t0;
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "hello");
    // ~1 ms unloaded; the bound leaves room for a sanitizer build on a busy machine.
    EXPECT_LT(took, 2s) << std::chrono::duration<double>(took).count() << " s";
  }
  // The idle ones are still alive and served.
  for (int i : {0, 1, 499, 998, 999}) {
    ASSERT_TRUE(idle[i]->send(get("/hello"))) << i;
    auto r = idle[i]->read_response();
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->body, "hello");
  }
  EXPECT_EQ(server_->stats().open_connections, static_cast<size_t>(kIdle));
}

TEST_F(HttpServerTest, OversizedBodyGets413AndTheServerKeepsServing) {
  HttpServerOptions o;
  o.limits.max_body_bytes = 64 * 1024;
  start(o);
  // Content-Length over the limit: 413 before any body byte.
  {
    TestConnection c(port_);
    ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\n"));
    auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
    EXPECT_EQ(nlohmann::json::parse(r->body)["error"]["type"], "invalid_request_error");
    EXPECT_TRUE(c.wait_closed());
  }
  // The client sends the whole body anyway: the server lingers, so the 413 arrives rather than a reset.
  {
    TestConnection c(port_);
    ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 300000\r\n\r\n" + std::string(300000, 'x')));
    auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
  }
  // Chunked: 413 once the chunks add up past the limit.
  {
    TestConnection c(port_);
    std::string req = "POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 5; ++i) req += "4000\r\n" + std::string(0x4000, 'c') + "\r\n";
    ASSERT_TRUE(c.send(req));
    auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
  }
  // Within the limit, chunked is fine.
  {
    TestConnection c(port_);
    ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n"));
    auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "abcde");
  }
  if (have_curl()) {
    const std::string path = test::temp_path("http_big_body");
    { std::ofstream(path) << std::string(2'000'000, 'z'); }
    auto p = test::run_process({kCurl, "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--data-binary", "@" + path,
                                url("/echo")},
                               30);
    EXPECT_EQ(p.out, "413") << p.err;
    ::unlink(path.c_str());
  }
  auto r = fetch(get("/hello"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "hello");
  EXPECT_GE(server_->stats().bad_requests, 3u);
}

TEST_F(HttpServerTest, MalformedRequestsGetTheirStatusAndClose) {
  HttpServerOptions o;
  o.limits.max_header_bytes = 4096;
  start(o);
  const std::vector<std::pair<std::string, int>> cases = {
      {"GET / HTTP/1.1\r\n\r\n", 400},                      // no Host
      {"NONSENSE\r\n\r\n", 400},                            // no request line
      {"GET / HTTP/3.0\r\nHost: h\r\n\r\n", 505},
      {"GET / HTTP/1.1\r\nHost: h\r\nBig: " + std::string(5000, 'x') + "\r\n\r\n", 431},
      {"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: -3\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n"s, 400},
  };
  for (const auto& [request, status] : cases) {
    TestConnection c(port_);
    ASSERT_TRUE(c.send(request));
    auto r = c.read_response();
    ASSERT_TRUE(r) << request;
    EXPECT_EQ(r->status, status) << request;
    EXPECT_TRUE(nlohmann::json::parse(r->body)["error"]["message"].is_string());
    EXPECT_TRUE(c.wait_closed()) << request;
  }
  auto r = fetch(get("/hello"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, ExpectContinueIsAnswered) {
  start();
  TestConnection c(port_);
  ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"));
  auto cont = c.read_response();
  ASSERT_TRUE(cont);
  EXPECT_EQ(cont->status, 100);
  ASSERT_TRUE(c.send("12345"));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "12345");
}

TEST_F(HttpServerTest, Http10ClosesAndStreamsUntilClose) {
  start();
  {
    TestConnection c(port_);
    ASSERT_TRUE(c.send("GET /hello HTTP/1.0\r\n\r\n"));
    auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "hello");
    EXPECT_TRUE(c.wait_closed());
  }
  {
    TestConnection c(port_);
    ASSERT_TRUE(c.send("GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->header("connection"), "keep-alive");
    ASSERT_TRUE(c.send("GET /hello HTTP/1.0\r\n\r\n"));
    ASSERT_TRUE(c.read_response());
  }
  {
    TestConnection c(port_);
    ASSERT_TRUE(c.send("GET /sse HTTP/1.0\r\n\r\n"));
    auto r = c.read_response();  // no length, no chunks: the body ends at the close
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->has_header("transfer-encoding"));
    EXPECT_EQ(r->body.substr(0, 15), "data: event 0\n\n");
    EXPECT_EQ(r->body.size(), 5 * 15u);
  }
}

TEST_F(HttpServerTest, ForgottenOrThrowingHandlerGives500AndKeepsTheConnection) {
  start();
  TestConnection c(port_);
  for (const char* path : {"/drop", "/throw"}) {
    ASSERT_TRUE(c.send(get(path)));
    auto r = c.read_response();
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 500) << path;
    EXPECT_EQ(nlohmann::json::parse(r->body)["error"]["type"], "server_error");
  }
  ASSERT_TRUE(c.send(get("/hello")));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "hello");
}

TEST_F(HttpServerTest, ErrorHelpersShapeAndRetryAfter) {
  start({}, [](HttpServer& s) {
    s.route("POST", "/v1/completions", [](const HttpRequest&, ResponseWriter w) {
      HttpResponse r = error_response(429, ApiError{"queue full", "", std::nullopt, "queue_full"});
      set_retry_after(r, std::chrono::seconds(3));
      w.send(std::move(r));
    });
  });
  auto r = fetch(post("/v1/completions", "{}"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(r->header("retry-after"), "3");
  const auto e = nlohmann::json::parse(r->body)["error"];
  EXPECT_EQ(e["message"], "queue full");
  EXPECT_EQ(e["type"], "rate_limit_error");
  EXPECT_EQ(e["code"], "queue_full");
  EXPECT_TRUE(e["param"].is_null());
}

TEST_F(HttpServerTest, OverMaxConnectionsGets503) {
  HttpServerOptions o;
  o.max_connections = 3;
  start(o);
  std::vector<std::unique_ptr<TestConnection>> held;
  for (int i = 0; i < 3; ++i) held.push_back(std::make_unique<TestConnection>(port_));
  ASSERT_TRUE(eventually([&] { return server_->stats().open_connections == 3; }));
  TestConnection extra(port_);
  auto r = extra.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->header("retry-after"), "1");
  held.clear();
  ASSERT_TRUE(eventually([&] { return server_->stats().open_connections == 0; }));
  auto ok = fetch(get("/hello"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(server_->stats().rejected, 1u);
}

TEST_F(HttpServerTest, ClientThatDoesNotReadIsCutOffAtTheWriteBuffer) {
  HttpServerOptions o;
  o.max_write_buffer_bytes = 256 * 1024;
  std::atomic<int> closes{0};
  std::atomic<bool> producer_saw_close{false};
  start(o, [&](HttpServer& s) {
    s.route("GET", "/flood", [&, this](const HttpRequest&, ResponseWriter w) {
      w.on_close([&] { closes.fetch_add(1); });
      w.start_stream(200, {{"Content-Type", "application/octet-stream"}});
      spawn([&, w] {
        const std::string block(16 * 1024, 'f');
        // 4,000 blocks (64 MB) is far past the socket buffers and the limit.
        for (int i = 0; i < 4000 && !stop_producers_; ++i) {
          if (!w.write(block)) {
            producer_saw_close = true;
            return;
          }
          while (w.buffered_bytes() > 1024 * 1024 && !w.closed()) std::this_thread::sleep_for(1ms);
        }
      });
    });
  });
  TestConnection c(port_);
  ASSERT_TRUE(c.send(get("/flood")));  // and never read
  EXPECT_TRUE(eventually([&] { return closes.load() == 1; }, 20s));
  EXPECT_TRUE(eventually([&] { return producer_saw_close.load(); }, 5s));
}

TEST_F(HttpServerTest, GracefulShutdownLetsAnInFlightStreamFinish) {
  HttpServerOptions o;
  o.linger_timeout = 10s;  // so that waiting it out would show
  start(o, [this](HttpServer& s) {
    s.route("GET", "/slow", [this](const HttpRequest&, ResponseWriter w) {
      w.start_sse();
      spawn([w] {
        for (int i = 0; i < 5; ++i) {
          std::this_thread::sleep_for(60ms);
          w.send_event(std::to_string(i));
        }
        w.end();
      });
    });
  });
  TestConnection streaming(port_);
  ASSERT_TRUE(streaming.send(get("/slow")));
  ASSERT_TRUE(streaming.read_until("data: 0\n\n"));
  TestConnection idle(port_);
  ASSERT_TRUE(idle.send(get("/hello")));
  ASSERT_TRUE(idle.read_response());

  std::atomic<bool> finished{false};
  std::atomic<bool> in_time{false};
  const auto t0 = Clock::now();
  std::thread stopper([&] {
    in_time = server_->shutdown(8s);
    finished = true;
  });
  EXPECT_TRUE(idle.wait_closed());  // idle keep-alive connections go at once
  auto r = streaming.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n");
  EXPECT_TRUE(streaming.wait_closed());
  streaming.close();  // the client closes on EOF, as clients do; the server then has nothing left
  stopper.join();
  EXPECT_TRUE(finished);
  EXPECT_TRUE(in_time);
  EXPECT_LT(Clock::now() - t0, 5s);
  TestConnection after(port_);
  EXPECT_FALSE(after.connected());  // nobody listens any more
}

TEST_F(HttpServerTest, ShutdownDeadlineCutsAStuckStreamAndCancelsIt) {
  start();
  TestConnection c(port_);
  ASSERT_TRUE(c.send(get("/forever")));
  ASSERT_TRUE(c.read_until("data: tick\n\n"));
  const auto t0 = Clock::now();
  EXPECT_FALSE(server_->shutdown(300ms));
  const auto took = Clock::now() - t0;
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 3s);
  EXPECT_EQ(on_close_calls_.load(), 1);
  EXPECT_TRUE(c.wait_closed());
}

TEST_F(HttpServerTest, SeveralLoopThreadsShareTheListener) {
  HttpServerOptions o;
  o.threads = 3;
  start(o);
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int t = 0; t < 6; ++t) {
    clients.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        TestConnection c(port_);
        if (!c.send(get("/hello"))) continue;
        auto r = c.read_response();
        if (r && r->body == "hello") ok.fetch_add(1);
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 120);
  EXPECT_TRUE(server_->shutdown(5s));
}

TEST(HttpShutdownSignal, SigtermIsReadNotFatal) {
  auto sig = ShutdownSignal::install();
  ASSERT_TRUE(sig.ok()) << sig.message();
  EXPECT_EQ(sig->wait(10ms), 0);
  ::raise(SIGTERM);  // to this thread, where it is blocked: pending, then read
  EXPECT_EQ(sig->wait(5s), SIGTERM);
  ::raise(SIGINT);
  EXPECT_EQ(sig->wait(5s), SIGINT);
  EXPECT_EQ(sig->wait(10ms), 0);
}

TEST(HttpServerStart, ReportsABusyPort) {
  HttpServerOptions o;
  o.port = 0;
  HttpServer a(o);
  ASSERT_TRUE(a.start().ok());
  o.port = a.port();
  HttpServer b(o);
  const Status s = b.start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Address already in use"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace th::http
