// The handle a handler answers through. Cheap to copy (one shared pointer)
// and safe to use from any thread: the engine thread keeps it and streams
// tokens while the event loop writes them out. When the last copy goes
// without a complete response, the server finishes it (a 500, or a cut
// stream), so a request can never hang on a forgotten writer.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_response.h"

namespace th::http {

class ResponseExchange;

class ResponseWriter {
 public:
  ResponseWriter() = default;  // detached: every call fails
  explicit ResponseWriter(std::shared_ptr<ResponseExchange> exchange);

  /// @brief Sends a complete response. False when the client is gone or a
  /// response was already started.
  bool send(HttpResponse response) const;

  /// @brief Starts a streamed response (chunked; to an HTTP/1.0 client, raw
  /// bytes until the connection closes). Then write() / send_event(), end().
  bool start_stream(int status = 200, std::vector<HttpHeader> headers = {}) const;
  /// @brief start_stream with text/event-stream and no caching, for
  /// server-sent events.
  bool start_sse(std::vector<HttpHeader> headers = {}) const;
  /// @brief Appends bytes to the stream (one chunk).
  bool write(std::string_view bytes) const;
  /// @brief Sends one SSE event: "data: <line>\n" per line of `data`, then "\n".
  bool send_event(std::string_view data) const;
  /// @brief Completes the stream.
  bool end() const;

  /// @brief True once the client disconnected (or the server closed the
  /// connection) before the response was complete.
  bool closed() const;
  /// @brief Runs `callback` once when the client disconnects before the
  /// response is complete: on the event-loop thread, so it must only signal
  /// (set a flag, post a cancel), never block. Runs at once if that already
  /// happened. Replaces an earlier callback.
  void on_close(std::function<void()> callback) const;
  /// @brief Bytes written here and not yet taken by the socket: a producer
  /// that sees this grow can slow down. Past HttpServerOptions::
  /// max_write_buffer_bytes the server closes the connection.
  size_t buffered_bytes() const;
  /// @brief The request's id (also sent as X-Request-Id).
  const std::string& request_id() const;

 private:
  struct Handle;
  std::shared_ptr<Handle> handle_;
};

/// @brief The body bytes send_event writes for `data`: "data: " and '\n' per line (CR, LF or
/// CRLF end one), then the blank line. A one-line event: its size + 8.
size_t sse_event_bytes(std::string_view data);

}  // namespace th::http
