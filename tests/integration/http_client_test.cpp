// The client library against real servers on 127.0.0.1: our HttpServer in
// this process, raw sockets that misbehave on purpose, and a `tokenhive
// serve` child process. Every wait is bounded; each test takes well under 5 s.
#include "client/http_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_process.h"
#include "serve_process.h"
#include "http/http_response.h"
#include "http/http_server.h"
#include "test_util.h"

namespace th::client {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
using http::HttpRequest;
using http::ResponseWriter;

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds limit = 3s) {
  const auto until = Clock::now() + limit;
  while (!cond()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// Records every backoff delay the client asks for, and really sleeps it.
struct SleepRecorder {
  std::mutex mu;
  std::vector<std::chrono::milliseconds> delays;
  std::function<void(std::chrono::milliseconds)> hook() {
    return [this](std::chrono::milliseconds d) {
      {
        std::lock_guard<std::mutex> lock(mu);
        delays.push_back(d);
      }
      std::this_thread::sleep_for(d);
    };
  }
  std::vector<std::chrono::milliseconds> get() {
    std::lock_guard<std::mutex> lock(mu);
    return delays;
  }
};

// Retry options without designated initializers (which warn for the fields left out).
RetryOptions retries(int max_attempts, std::chrono::milliseconds base = 10ms, std::chrono::milliseconds max = 50ms,
                     std::function<void(std::chrono::milliseconds)> sleep = nullptr, uint64_t seed = 0) {
  RetryOptions r;
  r.max_attempts = max_attempts;
  r.base_delay = base;
  r.max_delay = max;
  r.sleep = std::move(sleep);
  r.seed = seed;
  return r;
}

std::unique_ptr<HttpClient> make_client(const std::string& url, HttpClientOptions options = {}) {
  auto c = HttpClient::create(url, std::move(options));
  EXPECT_TRUE(c.ok()) << c.message();
  return c.ok() ? std::move(c).value() : nullptr;
}

// --- against our HttpServer, in this process --------------------------------

class ClientAndServer : public ::testing::Test {
 protected:
  ~ClientAndServer() override {
    stop_ = true;
    server_.reset();
    for (auto& t : producers_) t.join();
  }
  void start(const std::function<void(http::HttpServer&)>& routes, http::HttpServerOptions options = {}) {
    options.host = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<http::HttpServer>(options);
    routes(*server_);
    ASSERT_TRUE(server_->start().ok());
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  void produce(std::function<void()> f) {
    std::lock_guard<std::mutex> lock(mu_);
    producers_.emplace_back(std::move(f));
  }
  // Answers `status` (with Retry-After when given) the first `failures` times, then 200 "ok".
  void fail_then_ok(std::string path, int failures, int status, std::chrono::seconds retry_after = 0s) {
    start([=, this](http::HttpServer& s) {
      s.route("POST", path, [=, this](const HttpRequest&, ResponseWriter w) {
        if (calls_++ < failures) {
          http::HttpResponse r = http::error_response(status, "try later");
          if (retry_after.count() > 0) http::set_retry_after(r, retry_after);
          w.send(std::move(r));
        } else {
          w.send(http::text_response(200, "ok"));
        }
      });
    });
  }

  std::unique_ptr<http::HttpServer> server_;
  std::atomic<int> calls_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> client_closed_{false};
  std::mutex mu_;
  std::vector<std::thread> producers_;
};

TEST_F(ClientAndServer, Retries503UntilItSucceedsOnOneConnection) {
  fail_then_ok("/x", 2, 503);
  SleepRecorder sleeps;
  HttpClientOptions o;
  o.retry = retries(4, 10ms, 50ms, sleeps.hook(), 1);
  auto client = make_client(url(), o);
  Result<Response> r = client->request("POST", "/x", "{}");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ok");
  EXPECT_EQ(r->attempts, 3);
  const auto delays = sleeps.get();
  ASSERT_EQ(delays.size(), 2u);
  EXPECT_LE(delays[0], 10ms);
  EXPECT_LE(delays[1], 20ms);
  EXPECT_EQ(client->stats().retries, 2u);
  EXPECT_EQ(client->stats().attempts, 3u);
  EXPECT_EQ(server_->stats().accepted, 1u);  // a 503 keeps the connection
}

TEST_F(ClientAndServer, HonoursRetryAfterOn429) {
  fail_then_ok("/x", 1, 429, 1s);
  SleepRecorder sleeps;
  HttpClientOptions o;
  o.retry = retries(3, 10ms, 2000ms, sleeps.hook());
  auto client = make_client(url(), o);
  const auto t0 = Clock::now();
  Result<Response> r = client->request("POST", "/x", "{}");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->attempts, 2);
  EXPECT_EQ(sleeps.get(), std::vector<std::chrono::milliseconds>{1000ms});  // the server's wait, not the backoff's
  EXPECT_GE(ms_since(t0), 1000);
  EXPECT_LT(ms_since(t0), 2500);
}

TEST_F(ClientAndServer, RetryAfterLongerThanMaxDelayGivesTheAnswerBack) {
  fail_then_ok("/x", 1, 429, 30s);
  HttpClientOptions o;
  o.retry = retries(3, 10ms, 1000ms);
  auto client = make_client(url(), o);
  const auto t0 = Clock::now();
  Result<Response> r = client->request("POST", "/x", "{}");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(r->header("retry-after"), "30");
  EXPECT_EQ(r->attempts, 1);
  EXPECT_LT(ms_since(t0), 500);
}

TEST_F(ClientAndServer, Always503StopsAtMaxAttemptsWithinTheBackoffBounds) {
  fail_then_ok("/x", 1000, 503);
  SleepRecorder sleeps;
  HttpClientOptions o;
  o.retry = retries(4, 20ms, 60ms, sleeps.hook(), 3);
  auto client = make_client(url(), o);
  const auto t0 = Clock::now();
  Result<Response> r = client->request("POST", "/x", "{}");
  const int64_t elapsed = ms_since(t0);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, 503);  // the last answer, as it came
  EXPECT_EQ(r->attempts, 4);
  EXPECT_EQ(calls_.load(), 4);
  const auto delays = sleeps.get();
  ASSERT_EQ(delays.size(), 3u);
  const std::chrono::milliseconds ceilings[] = {20ms, 40ms, 60ms};  // min(60, 20 * 2^k)
  int64_t total = 0;
  for (size_t i = 0; i < delays.size(); ++i) {
    EXPECT_GE(delays[i], 0ms);
    EXPECT_LE(delays[i], ceilings[i]);
    total += delays[i].count();
  }
  EXPECT_GE(elapsed, total);
  EXPECT_LT(elapsed, 120 + 1000);  // the ceilings' sum plus slack for four round trips
  EXPECT_EQ(client->stats().retries, 3u);
}

TEST_F(ClientAndServer, OtherStatusesAreNotRetried) {
  fail_then_ok("/x", 1000, 500);
  auto client = make_client(url(), {});
  Result<Response> r = client->request("POST", "/x", "{}");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(r->attempts, 1);
  EXPECT_EQ(calls_.load(), 1);
}

TEST_F(ClientAndServer, TwentySequentialRequestsUseOneConnection) {
  start([](http::HttpServer& s) {
    s.route("POST", "/echo", [](const HttpRequest& r, ResponseWriter w) {
      w.send(http::text_response(200, r.body + "|" + std::string(r.header("authorization").value_or("")) + "|" +
                                            std::string(r.header("content-type").value_or(""))));
    });
  });
  HttpClientOptions o;
  o.bearer_token = "sk-test-123";
  auto client = make_client(url(), o);
  for (int i = 0; i < 20; ++i) {
    Result<Response> r = client->request("POST", "/echo", "{\"i\":" + std::to_string(i) + "}");
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r->body, "{\"i\":" + std::to_string(i) + "}|Bearer sk-test-123|application/json");
  }
  EXPECT_EQ(server_->stats().accepted, 1u);
  EXPECT_EQ(client->stats().connections_opened, 1u);
  EXPECT_EQ(client->stats().connections_reused, 19u);
}

TEST_F(ClientAndServer, PathPrefixOfTheBaseUrl) {
  start([](http::HttpServer& s) {
    s.route("GET", "/api/v1/models", [](const HttpRequest&, ResponseWriter w) { w.send(http::text_response(200, "models")); });
  });
  auto client = make_client(url() + "/api/", {});
  Result<Response> r = client->request("GET", "/v1/models");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->body, "models");
}

TEST_F(ClientAndServer, IdleConnectionClosedByTheServerIsReplaced) {
  http::HttpServerOptions so;
  so.idle_timeout = 100ms;
  start([](http::HttpServer& s) {
    s.route("GET", "/hello", [](const HttpRequest&, ResponseWriter w) { w.send(http::text_response(200, "hello")); });
  }, so);
  auto client = make_client(url(), {});
  ASSERT_TRUE(client->request("GET", "/hello").ok());
  ASSERT_TRUE(eventually([&] { return server_->stats().open_connections == 0; }));  // the server closed it
  Result<Response> r = client->request("GET", "/hello");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->body, "hello");
  EXPECT_EQ(r->attempts, 1);
  EXPECT_EQ(client->stats().retries, 0u);
  EXPECT_EQ(client->stats().connections_opened, 2u);
  EXPECT_EQ(server_->stats().accepted, 2u);
}

TEST_F(ClientAndServer, ThreadsShareOneClient) {
  start([](http::HttpServer& s) {
    s.route("POST", "/echo", [](const HttpRequest& r, ResponseWriter w) { w.send(http::text_response(200, r.body)); });
  });
  HttpClientOptions o;
  o.max_idle_connections = 8;
  auto client = make_client(url(), o);
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        const std::string body = std::to_string(t) + ":" + std::to_string(i);
        Result<Response> r = client->request("POST", "/echo", body);
        if (r.ok() && r->status == 200 && r->body == body) ++good;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), 200);
  const ClientStats st = client->stats();
  EXPECT_EQ(st.requests, 200u);
  EXPECT_EQ(st.connections_opened + st.connections_reused, 200u);
  // A connection is opened only when every one there is is busy, and 8 threads hold at most 8.
  EXPECT_LE(st.connections_opened, 8u);
  EXPECT_EQ(server_->stats().accepted, st.connections_opened);
}

TEST_F(ClientAndServer, StreamsServerSentEvents) {
  start([this](http::HttpServer& s) {
    s.route("POST", "/sse", [this](const HttpRequest&, ResponseWriter w) {
      w.start_sse();
      produce([w] {
        for (std::string e : {"one", "two\nlines", "{\"x\":3}"}) {
          std::this_thread::sleep_for(20ms);
          w.send_event(e);
        }
        w.send_event("[DONE]");
        w.end();
      });
    });
  });
  auto client = make_client(url(), {});
  std::vector<std::string> got;
  std::vector<int64_t> at;
  const auto t0 = Clock::now();
  Result<Response> r = client->stream_events("POST", "/sse", "{}", [&](const SseEvent& e) {
    got.push_back(e.data);
    at.push_back(ms_since(t0));
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->header("content-type").value_or("").substr(0, 17), "text/event-stream");
  EXPECT_TRUE(r->body.empty());
  EXPECT_FALSE(r->cancelled);
  EXPECT_EQ(got, (std::vector<std::string>{"one", "two\nlines", "{\"x\":3}", "[DONE]"}));
  ASSERT_EQ(at.size(), 4u);
  EXPECT_GE(at[2] - at[0], 30);  // delivered as they came, not at the end
  // The connection went back to the pool.
  ASSERT_TRUE(client->stream("POST", "/sse", "{}", [](std::string_view) { return true; }).ok());
  EXPECT_EQ(client->stats().connections_opened, 1u);
}

TEST_F(ClientAndServer, StoppingAStreamClosesTheConnection) {
  start([this](http::HttpServer& s) {
    s.route("POST", "/ticks", [this](const HttpRequest&, ResponseWriter w) {
      w.on_close([this] { client_closed_ = true; });
      w.start_sse();
      produce([w, this] {
        for (int i = 0; i < 500 && !stop_ && w.send_event("tick " + std::to_string(i)); ++i)
          std::this_thread::sleep_for(5ms);
        w.end();
      });
    });
    s.route("GET", "/hello", [](const HttpRequest&, ResponseWriter w) { w.send(http::text_response(200, "hello")); });
  });
  auto client = make_client(url(), {});
  int seen = 0;
  Result<Response> r = client->stream_events("POST", "/ticks", "{}", [&](const SseEvent&) { return ++seen < 3; });
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->cancelled);
  EXPECT_EQ(seen, 3);
  EXPECT_TRUE(eventually([&] { return client_closed_.load(); }));
  ASSERT_TRUE(client->request("GET", "/hello").ok());
  EXPECT_EQ(client->stats().connections_opened, 2u);  // the stopped stream's connection was not reused
}

TEST_F(ClientAndServer, StreamRetries503BeforeAnyData) {
  start([this](http::HttpServer& s) {
    s.route("POST", "/sse", [this](const HttpRequest&, ResponseWriter w) {
      if (calls_++ == 0) {
        w.send(http::error_response(503, "loading"));
        return;
      }
      w.start_sse();
      w.send_event("hi");
      w.end();
    });
  });
  HttpClientOptions o;
  o.retry = retries(3, 5ms, 20ms);
  auto client = make_client(url(), o);
  std::vector<std::string> got;
  Result<Response> r = client->stream_events("POST", "/sse", "{}", [&](const SseEvent& e) {
    got.push_back(e.data);
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->attempts, 2);
  EXPECT_EQ(got, std::vector<std::string>{"hi"});
}

TEST_F(ClientAndServer, ErrorBodyOfAStreamIsBufferedNotStreamed) {
  start([](http::HttpServer& s) {
    s.route("POST", "/sse", [](const HttpRequest&, ResponseWriter w) { w.send(http::error_response(400, "bad prompt")); });
  });
  auto client = make_client(url(), {});
  int calls = 0;
  Result<Response> r = client->stream("POST", "/sse", "{}", [&](std::string_view) { return ++calls > 0; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(json::parse(r->body)["error"]["message"], "bad prompt");
}

TEST_F(ClientAndServer, CacheServesIdenticalGreedyRequests) {
  start([this](http::HttpServer& s) {
    s.route("POST", "/v1/completions", [this](const HttpRequest& r, ResponseWriter w) {
      ++calls_;
      w.send(http::text_response(200, "answer to " + r.body));
    });
  });
  HttpClientOptions o;
  o.cache.enabled = true;
  auto client = make_client(url(), o);
  const std::string greedy = R"({"prompt":"a","temperature":0})";
  const std::string sampled = R"({"prompt":"a","temperature":1})";
  for (int i = 0; i < 3; ++i) {
    Result<Response> r = client->request("POST", "/v1/completions", greedy);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->body, "answer to " + greedy);
    EXPECT_EQ(r->from_cache, i > 0);
    ASSERT_TRUE(client->request("POST", "/v1/completions", sampled).ok());
  }
  EXPECT_EQ(calls_.load(), 4);  // one greedy, three sampled
  EXPECT_EQ(client->stats().cache_hits, 2u);
}

// --- against raw sockets that misbehave -------------------------------------

// A listening socket on 127.0.0.1 whose connections a handler serves one at
// a time on one thread (the server closes each after its handler).
class RawServer {
 public:
  using Handler = std::function<void(int fd, int index, const std::atomic<bool>& stop)>;
  explicit RawServer(Handler handler) : handler_(std::move(handler)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 64), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { loop(); });
  }
  ~RawServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int accepted() const { return accepted_.load(); }

  // Reads one request (head and Content-Length body); empty at EOF or after 3 s.
  static std::string read_request(int fd) {
    std::string buf;
    char tmp[4096];
    const auto until = Clock::now() + 3s;
    while (Clock::now() < until) {
      const size_t head_end = buf.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        size_t length = 0;
        std::string lower = to_lower_ascii(buf.substr(0, head_end));
        if (size_t p = lower.find("content-length:"); p != std::string::npos) length = std::stoul(lower.substr(p + 15));
        if (buf.size() >= head_end + 4 + length) return buf;
      }
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
      if (n <= 0) return {};
      buf.append(tmp, static_cast<size_t>(n));
    }
    return {};
  }
  static void write_all(int fd, std::string_view s) {
    while (!s.empty()) {
      const ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      s.remove_prefix(static_cast<size_t>(n));
    }
  }
  static void answer(int fd, std::string_view body) {
    write_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + std::string(body));
  }

 private:
  void loop() {
    int index = 0;
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 10) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      ++accepted_;
      handler_(c, index++, stop_);
      ::close(c);
    }
  }

  Handler handler_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

TEST(ClientAndRawServer, ClosedBeforeAResponseIsRetried) {
  for (bool read_first : {false, true}) {
    RawServer server([read_first](int fd, int, const std::atomic<bool>&) {
      if (read_first) RawServer::read_request(fd);
    });
    SleepRecorder sleeps;
    HttpClientOptions o;
    o.retry = retries(3, 10ms, 50ms, sleeps.hook());
    auto client = make_client(server.url(), o);
    Result<Response> r = client->request("POST", "/x", "{}");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("(3 attempts)"), std::string::npos) << r.message();
    EXPECT_TRUE(eventually([&] { return server.accepted() == 3; })) << server.accepted();
    EXPECT_EQ(sleeps.get().size(), 2u);
    EXPECT_EQ(client->stats().retries, 2u);
  }
}

TEST(ClientAndRawServer, RefusedConnectIsRetried) {
  // A port nobody listens on: bound, never listening.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  HttpClientOptions o;
  o.retry = retries(3, 5ms, 20ms);
  auto client = make_client("http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)), o);
  Result<Response> r = client->request("GET", "/x");
  ::close(fd);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("refused"), std::string::npos) << r.message();
  EXPECT_EQ(client->stats().attempts, 3u);
}

TEST(ClientAndRawServer, OnceTheBudgetIsSpentFailuresAreFast) {
  RawServer server([](int, int, const std::atomic<bool>&) {});  // closes at once
  SleepRecorder sleeps;
  HttpClientOptions o;
  o.retry = retries(3, 250ms, 250ms, sleeps.hook());
  o.retry.budget.min_per_second = 0;
  o.retry.budget.capacity = 2;
  auto client = make_client(server.url(), o);
  ASSERT_FALSE(client->request("GET", "/x").ok());  // three tries: the budget's two tokens
  EXPECT_EQ(client->stats().retries, 2u);
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    Result<Response> r = client->request("GET", "/x");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.message().find("attempts"), std::string::npos) << r.message();  // one try
    EXPECT_LT(ms_since(t0), 120);  // no backoff (up to 250 ms): fail fast
  }
  EXPECT_EQ(client->stats().retries, 2u);
  EXPECT_EQ(client->stats().budget_exhausted, 5u);
  EXPECT_EQ(sleeps.get().size(), 2u);
  EXPECT_TRUE(eventually([&] { return server.accepted() == 8; }));
}

TEST(ClientAndRawServer, ReusedConnectionClosedAsWeSendIsRedoneTransparently) {
  // The first connection answers one request, then reads the next and closes
  // without answering (the race of a server's idle close); later ones answer.
  RawServer server([](int fd, int index, const std::atomic<bool>&) {
    if (index == 0) {
      RawServer::read_request(fd);
      RawServer::answer(fd, "first");
      RawServer::read_request(fd);
      return;
    }
    while (!RawServer::read_request(fd).empty()) RawServer::answer(fd, "again");
  });
  HttpClientOptions o;
  o.retry = retries(1);  // no retries at all: the redo is not one
  auto client = make_client(server.url(), o);
  Result<Response> a = client->request("GET", "/x");
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->body, "first");
  Result<Response> b = client->request("GET", "/x");
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(b->body, "again");
  EXPECT_EQ(b->attempts, 1);
  EXPECT_EQ(client->stats().stale_redos, 1u);
  EXPECT_EQ(client->stats().connections_opened, 2u);
}

TEST(ClientAndRawServer, BodyUntilCloseAndChunked) {
  RawServer server([](int fd, int index, const std::atomic<bool>&) {
    RawServer::read_request(fd);
    if (index == 0) {
      RawServer::write_all(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end");
    } else {
      RawServer::write_all(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nchun\r\n3\r\nked\r\n0\r\n\r\n");
      RawServer::read_request(fd);  // kept alive: the next request comes here
      RawServer::answer(fd, "third");
    }
  });
  auto client = make_client(server.url(), {});
  Result<Response> a = client->request("GET", "/x");
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->body, "until the end");
  Result<Response> b = client->request("GET", "/x");
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(b->body, "chunked");
  Result<Response> c = client->request("GET", "/x");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->body, "third");
  EXPECT_EQ(server.accepted(), 2);
}

TEST(ClientAndRawServer, RequestTimeoutBoundsTheCall) {
  RawServer server([](int fd, int, const std::atomic<bool>& stop) {
    RawServer::read_request(fd);
    while (!stop) std::this_thread::sleep_for(5ms);  // never answers
  });
  HttpClientOptions o;
  o.request_timeout = 300ms;
  auto client = make_client(server.url(), o);
  const auto t0 = Clock::now();
  Result<Response> r = client->request("GET", "/x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("timeout"), std::string::npos) << r.message();
  EXPECT_GE(ms_since(t0), 290);
  EXPECT_LT(ms_since(t0), 1500);
}

// A cancel flag stops a call stalled mid-stream (how a router leaves a hung cell) within
// ~10 ms of being set, and the call is not retried.
TEST(ClientAndRawServer, CancelFlagStopsAStalledStream) {
  RawServer server([](int fd, int, const std::atomic<bool>& stop) {
    RawServer::read_request(fd);
    RawServer::write_all(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "c\r\ndata: one\n\n\r\n");
    while (!stop) std::this_thread::sleep_for(5ms);  // then nothing more
  });
  HttpClientOptions o;
  o.retry.max_attempts = 3;
  auto client = make_client(server.url(), o);
  std::atomic<bool> cancel{false};
  std::vector<std::string> events;
  Clock::time_point cancelled_at;
  std::thread canceller([&] {
    std::this_thread::sleep_for(200ms);
    cancelled_at = Clock::now();
    cancel = true;
  });
  Result<Response> r = client->stream_events(
      "POST", "/s", "{}",
      [&](const SseEvent& e) {
        events.push_back(e.data);
        return true;
      },
      {}, &cancel);
  const Clock::time_point returned = Clock::now();
  canceller.join();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("cancelled"), std::string::npos) << r.message();
  EXPECT_EQ(events, std::vector<std::string>{"one"});
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(returned - cancelled_at).count(), 100);
  EXPECT_EQ(client->stats().attempts, 1u);
  EXPECT_EQ(server.accepted(), 1);
  // A flag already set: the call does not even connect.
  Result<Response> none = client->request("GET", "/x", {}, {}, &cancel);
  EXPECT_FALSE(none.ok());
}

// --- against `tokenhive serve` ------------------------------------------------

class ClientAndServe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    serve_ = new test::ServeProcess(
        {"-m", test::shared_path("models/stories260K.gguf"), "--served-model-name", "stories", "-t", "1", "--kv-cache-mib", "64"});
    ASSERT_TRUE(serve_->ok()) << serve_->log();
  }
  static void TearDownTestSuite() {
    delete serve_;
    serve_ = nullptr;
  }
  static test::ServeProcess* serve_;
};
test::ServeProcess* ClientAndServe::serve_ = nullptr;

TEST_F(ClientAndServe, GreedyCompletionWholeAndStreamedAgree) {
  HttpClientOptions o;
  o.cache.enabled = true;
  auto client = make_client(serve_->url(), o);
  const json body = {{"model", "stories"}, {"prompt", ""}, {"max_tokens", 64}, {"temperature", 0}};
  Result<Response> whole = client->request("POST", "/v1/completions", body.dump());
  ASSERT_TRUE(whole.ok()) << whole.message();
  ASSERT_EQ(whole->status, 200) << whole->body;
  const std::string text = json::parse(whole->body)["choices"][0]["text"];
  EXPECT_GT(text.size(), 100u);
  std::string reference = test::slurp(test::shared_path("models/stories260K.greedy-from-bos.txt"));
  EXPECT_EQ(reference.substr(0, text.size()), text);  // the model's reference greedy text
  Result<Response> again = client->request("POST", "/v1/completions", body.dump());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->from_cache);
  EXPECT_EQ(again->body, whole->body);

  json streamed_body = body;
  streamed_body["stream"] = true;
  std::string streamed;
  int chunks = 0;
  bool done = false;
  Result<Response> s = client->stream_events("POST", "/v1/completions", streamed_body.dump(), [&](const SseEvent& e) {
    if (e.data == "[DONE]") {
      done = true;
      return true;
    }
    ++chunks;
    streamed += json::parse(e.data)["choices"][0]["text"].get<std::string>();
    return true;
  });
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->status, 200);
  EXPECT_TRUE(done);
  EXPECT_GE(chunks, 1);  // the server may put several tokens in one event when they come faster than it writes
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(client->stats().connections_opened, 1u);  // the stream's connection was reused
}

}  // namespace
}  // namespace th::client
