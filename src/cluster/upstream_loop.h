// The router's side of its connections to cells: one epoll thread that runs
// every proxied exchange (connect, send, read the response, hand the body on
// as it comes) on non-blocking sockets, and the router's timers. No thread
// per request: 5,000 streams in flight are 5,000 sockets and their buffers
// (BENCHMARKS.md, "Router: concurrent streams").
//
//   auto loop = UpstreamLoop::create();
//   UpstreamCall c;
//   c.target = ...; c.wire = upstream_wire(...);
//   c.on_body = [](std::string_view piece) { ...; return true; };  // on the loop thread
//   c.on_done = [](UpstreamResult r) { ... };                       // once, on the loop thread
//   (*loop)->submit(std::move(c));
//   (*loop)->post_after(std::chrono::milliseconds(20), [] { ... });
//
// Callbacks run on the loop thread and must not block. Connections are kept
// alive per target (most recent first, at most 1,024 idle per target, 30 s);
// a call on a reused connection that fails before any byte of the response
// is redone once on a new one (the cell never saw it), as HttpClient does.
// A call ends with an error when its cancel flag turns true (checked every
// 10 ms: the heartbeats, not a read timeout, find a hung cell) or at its deadline.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "client/http_client.h"
#include "client/response.h"

namespace th::cluster {

struct UpstreamResult {
  Status error;            // not ok: no complete response (refused, broken, timed out, cancelled, malformed)
  int status = 0;
  std::vector<client::Header> headers;
  std::string body;        // the body, unless on_body took it (a 2xx answer with on_body set)
  bool delivered = false;  // on_body had bytes
  bool stopped = false;    // on_body returned false (the connection was closed)

  std::optional<std::string_view> header(std::string_view name) const;
};

struct UpstreamCall {
  client::BaseUrl target;
  std::string wire;  // the whole request (upstream_wire)
  bool head = false; // a HEAD request: no body follows the answer's head
  const std::atomic<bool>* cancel = nullptr;       // either flag true ends the call
  const std::atomic<bool>* also_cancel = nullptr;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::chrono::milliseconds connect_timeout{1000};
  size_t max_body_bytes = 16u << 20;        // a buffered body past this fails the call
  std::function<bool(std::string_view)> on_body;  // pieces of a 2xx body; null: buffered into the result
  std::function<void(UpstreamResult)> on_done;
};

/// @brief The bytes of an HTTP/1.1 request to `target` (`path` after its prefix) with a
/// JSON body; `headers` go as they are (the caller's: already validated by our parser).
std::string upstream_wire(const client::BaseUrl& target, std::string_view method, std::string_view path,
                          std::string_view body, const std::vector<client::Header>& headers);

class UpstreamLoop {
 public:
  /// @brief Creates the epoll set and starts the loop's thread.
  static Result<std::unique_ptr<UpstreamLoop>> create();
  /// @brief stop().
  ~UpstreamLoop();
  UpstreamLoop(const UpstreamLoop&) = delete;
  UpstreamLoop& operator=(const UpstreamLoop&) = delete;

  /// @brief From any thread: starts `call`; its on_done runs exactly once (also when the loop
  /// stops first: with an error that says so).
  void submit(UpstreamCall call);
  /// @brief From any thread: runs `task` on the loop thread after `delay`.
  void post_after(std::chrono::milliseconds delay, std::function<void()> task);
  /// @brief Ends every call (on_done with "the router is stopping") and joins the thread.
  void stop();
  /// @brief Exchanges in progress (connections carrying a request).
  size_t active() const;
  /// @brief Idle connections kept for reuse, over every target.
  size_t idle() const;

 private:
  struct Impl;
  UpstreamLoop() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace th::cluster
