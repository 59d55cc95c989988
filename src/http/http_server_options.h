// What an HttpServer listens on and the limits it holds every client to.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "http/http_request_parser.h"

namespace th::http {

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // a numeric address or a name; "0.0.0.0" / "::" for all
  int port = 8080;                 // 0: an ephemeral port (HttpServer::port() tells which)
  // Event-loop threads. One loop moves ~100k small requests/s; the engine,
  // not HTTP, is the bottleneck of an LLM server, so one is the default.
  int threads = 1;
  int backlog = 1024;
  // Open connections over all loops. Each idle one costs ~1 KiB here and two
  // socket buffers in the kernel; beyond it new ones get 503 and are closed.
  size_t max_connections = 10000;
  HttpLimits limits;

  // An open connection with no request in progress is closed after this.
  // OpenAI's Python client keeps pooled connections 5 s; 60 s is nginx-like.
  std::chrono::milliseconds idle_timeout{60'000};
  // From a connection's (or request's) first byte to the end of its headers:
  // a client that sends headers slower than this (slow-loris) gets 408.
  std::chrono::milliseconds header_timeout{10'000};
  // From the end of the headers to the end of the body: 1 MiB in 30 s is
  // ~35 KB/s, slower than any real client on a working network.
  std::chrono::milliseconds body_timeout{30'000};
  // A response with bytes pending that the client does not take for this
  // long is given up (the connection closes, the request is cancelled).
  std::chrono::milliseconds write_timeout{30'000};
  // After an error response, the server stops writing and reads (discarding)
  // for up to this long before it closes, so that the client gets the error
  // rather than a reset while it is still sending its body.
  std::chrono::milliseconds linger_timeout{2'000};
  // Bytes a response may have waiting for a client that does not read; over
  // it the connection closes. A token stream is ~100 bytes an event.
  size_t max_write_buffer_bytes = 8u << 20;
  // Origins whose browser requests get CORS headers ("*": all); empty: CORS off, OPTIONS
  // is routed like any method (405 where no route takes it).
  std::vector<std::string> cors_origins;
};

/// @brief A snapshot of the server's counters.
struct HttpServerStats {
  size_t open_connections = 0;
  size_t in_flight = 0;            // requests dispatched whose response is not complete
  uint64_t accepted = 0;           // connections accepted (rejected ones included)
  uint64_t rejected = 0;           // connections over max_connections (503)
  uint64_t requests = 0;           // requests dispatched to a handler or a 404/405
  uint64_t bad_requests = 0;       // malformed requests answered with a 4xx/5xx and closed
  uint64_t timeouts = 0;           // 408s and given-up writes
};

}  // namespace th::http
