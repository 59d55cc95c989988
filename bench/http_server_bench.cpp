// HTTP transport micro-benchmarks: the request parser's throughput on a
// typical API request, and keep-alive round trips of a trivial GET through a
// real HttpServer on 127.0.0.1 (one client connection, so this is latency:
// requests/s = 1 / round-trip time; wrk measures concurrency, see
// docs/ARCHITECTURE.md).
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "http/http_request_parser.h"
#include "http/http_response.h"
#include "http/http_server.h"

namespace {

using namespace th;

const std::string kRequest =
    "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost:8080\r\nUser-Agent: OpenAI/Python 1.40.0\r\n"
    "Accept: application/json\r\nContent-Type: application/json\r\nAuthorization: Bearer sk-0123456789abcdef\r\n"
    "X-Stainless-Lang: python\r\nContent-Length: 120\r\n\r\n" +
    std::string(120, 'x');

void BM_HttpParseRequest(benchmark::State& state) {
  http::HttpRequestParser p;
  for (auto _ : state) {
    p.feed(kRequest);
    http::HttpRequest r = p.take();
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kRequest.size()));
}
BENCHMARK(BM_HttpParseRequest);

void BM_HttpKeepAliveGet(benchmark::State& state) {
  http::HttpServerOptions o;
  o.port = 0;
  http::HttpServer server(o);
  server.route("GET", "/hello", [](const http::HttpRequest&, http::ResponseWriter w) { w.send(http::text_response(200, "hello")); });
  if (!server.start().ok()) {
    state.SkipWithError("cannot start the server");
    return;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    state.SkipWithError("cannot connect");
    ::close(fd);
    return;
  }
  const std::string req = "GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  char buf[4096];
  for (auto _ : state) {
    if (::send(fd, req.data(), req.size(), 0) != static_cast<ssize_t>(req.size())) break;
    // The response is small and fits one read; it ends with its 5-byte body.
    std::string got;
    while (got.size() < 5 || got.compare(got.size() - 5, 5, "hello") != 0) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  server.shutdown(std::chrono::seconds(1));
}
BENCHMARK(BM_HttpKeepAliveGet)->UseRealTime();

}  // namespace
