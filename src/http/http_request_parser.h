// An incremental parser of HTTP/1.0 and HTTP/1.1 requests from a byte stream.
//
// Feed it bytes as they arrive, in pieces of any size: it consumes up to the
// end of one request and stops, so pipelined requests are taken one at a
// time. Memory is bounded by the limits: the head (request line and headers)
// is never buffered past max_header_bytes, the body never past
// max_body_bytes. Every malformed input ends in kError with the status a
// server should answer (400, 413, 414, 417, 431, 501, 505) and a short reason;
// after an error the connection cannot be resynchronized and must be closed.
//
// Decisions (RFC 9112 leaves some to the implementation):
// - A bare LF ends a line everywhere (request line, headers, chunk lines),
//   as nginx, Apache and Go do; a bare CR anywhere is rejected (400).
// - obs-fold (a header line starting with SP or HTAB) is rejected (400).
// - Content-Length with Transfer-Encoding is rejected (400) rather than
//   resolved in favour of chunked: no framing ambiguity, no smuggling.
// - Only "chunked" is supported as a transfer coding (others: 501).
// - Repeated Content-Length headers (or a list) are accepted only when all
//   values are equal, as RFC 9110 8.6 allows.
// - HTTP/1.1 needs exactly one Host header (RFC 9112 3.2: 400 otherwise).
// - Up to the header limit, empty lines before a request line are skipped
//   (RFC 9112 2.2: some clients send CRLF after a POST body).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "http/http_request.h"

namespace th::http {

struct HttpLimits {
  // 16 KiB of request line and headers: nginx's default large buffer is 8 KiB,
  // and an OpenAI client with a bearer key and a few custom headers stays
  // under 2 KiB. Over it: 431 (414 while still in the request line).
  size_t max_header_bytes = 16 * 1024;
  size_t max_headers = 100;  // 431 over it; the same bound applies to trailers
  // 1 MiB of body: a 32k-token prompt as JSON text is ~150 KiB; token-id
  // arrays are ~6 bytes a token. Over it: 413.
  size_t max_body_bytes = 1 << 20;
  size_t max_chunk_line_bytes = 1024;  // a chunk-size line with its extensions
};

struct HttpError {
  int status = 0;          // 400, 413, 414, 417, 431, 501 or 505
  const char* reason = "";  // a short, fixed phrase: "invalid Content-Length"
};

class HttpRequestParser {
 public:
  enum class State { kNeedMore, kComplete, kError };

  explicit HttpRequestParser(HttpLimits limits = {});

  /// @brief Consumes bytes of the current request from `data`; returns how
  /// many it used. It stops at the end of a request (kComplete: take() it,
  /// then feed the rest) or at an error (kError). In those states it takes
  /// nothing more.
  size_t feed(std::string_view data);

  State state() const;
  /// @brief True once any byte of a request (not blank lines before it) came.
  bool started() const;
  /// @brief True while the headers are complete and the body is still arriving.
  bool in_body() const;
  /// @brief The request being read asks for "100 Continue" before its body.
  bool expects_continue() const { return request_.expects_continue; }
  /// @brief Why parsing failed (valid in kError).
  const HttpError& error() const { return error_; }
  const HttpLimits& limits() const { return limits_; }

  /// @brief The complete request (valid in kComplete); resets for the next one.
  HttpRequest take();
  /// @brief Forgets any partial request or error.
  void reset();

 private:
  enum class Phase : uint8_t {
    kRequestLine, kHeaders, kBody, kChunkSize, kChunkData, kChunkDataEnd, kTrailers, kDone, kError
  };
  bool fail(int status, const char* reason);
  bool on_line(std::string_view line);
  bool on_request_line(std::string_view line);
  bool on_header_line(std::string_view line, bool trailer);
  bool on_headers_end();
  bool on_chunk_size_line(std::string_view line);

  HttpLimits limits_;
  Phase phase_ = Phase::kRequestLine;
  HttpError error_;
  HttpRequest request_;
  std::string line_;           // a line split across feeds, without its LF
  size_t head_bytes_ = 0;      // bytes of the head so far, blank lines before it included
  size_t trailer_bytes_ = 0;
  size_t trailer_count_ = 0;
  uint64_t remaining_ = 0;     // body or chunk bytes still to come
};

}  // namespace th::http
