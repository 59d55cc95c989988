// An incremental parser of one HTTP/1.x response from a byte stream: feed it
// bytes in pieces of any size; it hands back the de-chunked body as it comes.
//
// Framing, RFC 9112 6.3: no body after HEAD, for 1xx (skipped: the final
// response follows), 204 and 304; Transfer-Encoding ending in chunked;
// Content-Length; otherwise the body runs to the connection's close
// (finish_at_eof()). As in the server's parser a bare LF ends a line; both
// Content-Length and Transfer-Encoding, conflicting lengths and heads over
// the limits are errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "client/response.h"

namespace th::client {

struct ResponseLimits {
  size_t max_head_bytes = 64 * 1024;  // status line and headers (a response's, or its trailers)
  size_t max_headers = 200;
};

class HttpResponseParser {
 public:
  explicit HttpResponseParser(ResponseLimits limits = {}) : limits_(limits) {}

  /// @brief Starts over for the response to a request with `method` (HEAD has no body).
  void reset(std::string_view method);

  /// @brief Consumes bytes of the response from `data`, appending body bytes
  /// to `*body`; returns how many it used (it stops at the response's end).
  /// An error when the response is malformed.
  Result<size_t> feed(std::string_view data, std::string* body);
  /// @brief The connection closed: completes a body framed by the close; an
  /// error for any other unfinished response.
  Status finish_at_eof();

  bool head_done() const { return phase_ >= Phase::kBody; }
  bool done() const { return phase_ == Phase::kDone; }
  int status() const { return status_; }
  const std::vector<Header>& headers() const { return headers_; }
  /// @brief After done(): the connection may carry another request (HTTP/1.1
  /// without "Connection: close", or 1.0 with keep-alive; not close-framed).
  bool keep_alive() const { return keep_alive_; }

 private:
  enum class Phase : uint8_t { kStatusLine, kHeaders, kBody, kUntilClose, kChunkSize, kChunkData, kChunkDataEnd, kTrailers, kDone };
  Status on_line(std::string_view line);
  Status on_headers_end();

  ResponseLimits limits_;
  Phase phase_ = Phase::kStatusLine;
  bool head_request_ = false;
  int status_ = 0;
  int version_minor_ = 1;
  std::vector<Header> headers_;
  bool keep_alive_ = true;
  std::string line_;
  size_t head_bytes_ = 0;
  size_t trailer_count_ = 0;
  uint64_t remaining_ = 0;
};

}  // namespace th::client
