// An asynchronous HTTP/1.1 server: keep-alive, pipelining, chunked and SSE
// streaming, all on a few epoll event-loop threads (HttpServerOptions::
// threads), none per connection, so thousands of open connections cost
// memory, not threads.
//
// Our own epoll loop rather than Boost.Beast/Asio: no dependency (Beast's
// headers take minutes per file to compile on a 2-core builder), every
// limit and timeout is ours to set and test, and the request parser is ours
// to fuzz. The price is Linux only, which the rest of tokenhive is anyway.
//
//   HttpServer server(options);
//   server.route("GET", "/health", [](const HttpRequest&, ResponseWriter w) {
//     w.send(json_response(200, {{"status", "ok"}}));
//   });
//   TH_RETURN_IF_ERROR(server.start());
//   ...                       // e.g. ShutdownSignal::wait()
//   server.shutdown(std::chrono::seconds(10));
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/status.h"
#include "http/http_router.h"
#include "http/http_server_options.h"

namespace th::http {

class HttpServer {
 public:
  using Handler = HttpHandler;

  explicit HttpServer(HttpServerOptions options = {});
  /// @brief Shuts down at once (in-flight responses are cut) if still running.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// @brief Routes `method` on `path` (see HttpRouter::add). Before start() only.
  void route(std::string method, std::string path, Handler handler);

  /// @brief Binds, listens and starts the event-loop threads.
  Status start();
  /// @brief The bound port (the ephemeral one when options.port was 0).
  int port() const;

  // stop_accepting() and shutdown() are for the thread that owns the server,
  // never a handler: they wait for the loops.

  /// @brief Accepts no new connections: closes the listening socket and the
  /// idle keep-alive connections; the others close after their current
  /// response, which says Connection: close.
  void stop_accepting();
  /// @brief stop_accepting(), then waits up to `deadline` for every
  /// connection to finish and close; then closes what is left (the on_close
  /// callbacks of unfinished responses fire, so their requests are cancelled)
  /// and joins the threads. True when everything finished within the deadline.
  bool shutdown(std::chrono::milliseconds deadline);

  HttpServerStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace th::http
