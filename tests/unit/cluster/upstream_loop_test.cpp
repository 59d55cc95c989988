// The router's upstream loop against an in-process HTTP server: a whole answer, a stream
// in pieces, connections kept and reused, a refused connection, a cancelled call, timers,
// and many calls in flight on one thread.
#include "cluster/upstream_loop.h"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "http/http_response.h"
#include "http/http_server.h"

namespace th::cluster {
namespace {

using namespace std::chrono_literals;

struct Server {
  std::unique_ptr<http::HttpServer> server;
  // Shared with the /hang threads, which are detached and may wake after the Server is gone.
  std::shared_ptr<std::atomic<bool>> release = std::make_shared<std::atomic<bool>>(false);
  Server() {
    http::HttpServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    server = std::make_unique<http::HttpServer>(o);
    server->route("POST", "/whole", [](const http::HttpRequest& r, http::ResponseWriter w) {
      w.send(http::text_response(200, "got " + r.body, "application/json"));
    });
    server->route("POST", "/stream", [](const http::HttpRequest&, http::ResponseWriter w) {
      std::thread([w] {
        w.start_sse();
        for (int i = 0; i < 5; ++i) {
          w.send_event(std::to_string(i));
          std::this_thread::sleep_for(2ms);
        }
        w.end();
      }).detach();
    });
    server->route("POST", "/hang", [release = release](const http::HttpRequest&, http::ResponseWriter w) {
      std::thread([release, w] {
        w.start_sse();
        while (!release->load()) std::this_thread::sleep_for(1ms);
        w.end();
      }).detach();
    });
    EXPECT_TRUE(server->start().ok());
  }
  ~Server() {
    *release = true;
    server->shutdown(1000ms);
  }
  client::BaseUrl url() const { return *client::parse_base_url("http://127.0.0.1:" + std::to_string(server->port())); }
};

std::future<UpstreamResult> call(UpstreamLoop& loop, const client::BaseUrl& to, const std::string& path, std::string* body_pieces = nullptr,
                                 const std::atomic<bool>* cancel = nullptr) {
  auto done = std::make_shared<std::promise<UpstreamResult>>();
  UpstreamCall c;
  c.target = to;
  c.wire = upstream_wire(to, "POST", path, "{}", {});
  c.cancel = cancel;
  if (body_pieces) c.on_body = [body_pieces](std::string_view p) {
    body_pieces->append(p);
    return true;
  };
  c.on_done = [done](UpstreamResult r) { done->set_value(std::move(r)); };
  loop.submit(std::move(c));
  return done->get_future();
}

TEST(UpstreamLoop, WholeAnswersStreamsAndReusedConnections) {
  Server s;
  auto loop = UpstreamLoop::create();
  ASSERT_TRUE(loop.ok()) << loop.message();
  UpstreamResult r = call(**loop, s.url(), "/whole").get();
  ASSERT_TRUE(r.error.ok()) << r.error.message();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "got {}");
  EXPECT_EQ(r.header("Content-Type").value_or(""), "application/json");
  EXPECT_EQ((*loop)->idle(), 1u);  // kept for the next call

  std::string pieces;
  r = call(**loop, s.url(), "/stream", &pieces).get();
  ASSERT_TRUE(r.error.ok()) << r.error.message();
  EXPECT_TRUE(r.delivered);
  EXPECT_TRUE(r.body.empty());
  EXPECT_EQ(pieces, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n");
  EXPECT_EQ((*loop)->idle(), 1u);  // the same connection again

  // 200 calls in flight at once on the one thread.
  std::vector<std::future<UpstreamResult>> many;
  std::vector<std::string> bodies(200);
  for (size_t i = 0; i < bodies.size(); ++i) many.push_back(call(**loop, s.url(), "/stream", &bodies[i]));
  for (size_t i = 0; i < many.size(); ++i) {
    UpstreamResult m = many[i].get();
    EXPECT_TRUE(m.error.ok()) << m.error.message();
    EXPECT_EQ(bodies[i].size(), pieces.size());
  }
  EXPECT_EQ((*loop)->active(), 0u);
}

TEST(UpstreamLoop, RefusedCancelledAndStoppedCallsEndWithAnError) {
  auto loop = UpstreamLoop::create();
  ASSERT_TRUE(loop.ok());
  // A port bound but not listening refuses.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  UpstreamResult r = call(**loop, *client::parse_base_url("http://127.0.0.1:" + std::to_string(ntohs(a.sin_port))), "/whole").get();
  ::close(fd);
  EXPECT_FALSE(r.error.ok());
  EXPECT_NE(r.error.message().find("connect"), std::string::npos) << r.error.message();

  Server s;
  std::atomic<bool> cancel{false};
  std::string pieces;
  auto hung = call(**loop, s.url(), "/hang", &pieces, &cancel);
  EXPECT_EQ(hung.wait_for(50ms), std::future_status::timeout);
  const auto t0 = std::chrono::steady_clock::now();
  cancel = true;
  r = hung.get();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 200ms);  // the 10 ms tick sees it
  EXPECT_EQ(r.error.message(), "cancelled");

  // A timer runs on the loop; stop() ends what is still in flight.
  std::promise<void> ran;
  (*loop)->post_after(5ms, [&] { ran.set_value(); });
  EXPECT_EQ(ran.get_future().wait_for(2s), std::future_status::ready);
  auto left = call(**loop, s.url(), "/hang", &pieces);
  std::this_thread::sleep_for(20ms);
  (*loop)->stop();
  r = left.get();
  EXPECT_EQ(r.error.message(), "the router is stopping");
  r = call(**loop, s.url(), "/whole").get();  // after stop: at once, with the same error
  EXPECT_EQ(r.error.message(), "the router is stopping");
}

}  // namespace
}  // namespace th::cluster
