// The access log: one JSON object per line per finished request, every key
// always present (null when it does not apply), in this order:
//
//   {"time":"2025-01-31T12:34:56.789Z","request_id":"9f3ac1d2-17",
//    "method":"POST","path":"/v1/completions","status":200,"tenant":"acme",
//    "prompt_tokens":12,"completion_tokens":30,"cached_tokens":0,
//    "queue_ms":1.2,"ttft_ms":40.5,"e2e_ms":610.0,"finish_reason":"stop",
//    "bytes_out":1234,"client":"10.0.0.7:51234"}
//
// The record has no field for prompt or completion text, headers or the
// query string, so none can reach the log: the path is cut at '?'. Lines are
// written whole (one write per line under a mutex, flushed), so concurrent
// requests never interleave within a line.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"

namespace th::server {

struct AccessRecord {
  std::chrono::system_clock::time_point time;  // when the request finished
  std::string request_id;
  std::string method;
  std::string path;    // a query string, if any, is dropped when written
  int status = 0;
  std::string tenant;  // empty: null (no key, or refused before authentication)
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
  double queue_ms = -1;       // negative: null (never reached the engine)
  double ttft_ms = -1;        // negative: null (no token generated)
  double e2e_ms = -1;         // negative: null
  std::string finish_reason;  // "stop", "length", ...; empty: null
  int64_t bytes_out = 0;      // body bytes handed to the client (SSE events with their framing); not the head
  std::string client;         // the peer's "address:port" ("[v6]:port"); empty: null
};

class AccessLog {
 public:
  /// @brief Logs to `out` (not owned; stdout, stderr, or a FILE* the caller closes).
  explicit AccessLog(std::FILE* out);
  /// @brief Opens `path` for appending (created 0640 if absent).
  static Result<std::unique_ptr<AccessLog>> open(const std::string& path);
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  /// @brief Writes one line and flushes it. Thread-safe. A failed write is
  /// counted (write_errors), never thrown: logging must not fail a request.
  void write(const AccessRecord& record);

  /// @brief The line `write` would write, with its '\n'.
  static std::string format(const AccessRecord& record);

  uint64_t write_errors() const;

 private:
  explicit AccessLog(UniqueFd fd);

  std::FILE* file_ = nullptr;  // when logging to a FILE*
  UniqueFd fd_;                // when logging to a path (O_APPEND: one write() per line)
  mutable std::mutex mu_;
  uint64_t write_errors_ = 0;
};

/// @brief RFC 3339 UTC with milliseconds: "2025-01-31T12:34:56.789Z".
std::string rfc3339_utc_ms(std::chrono::system_clock::time_point t);

}  // namespace th::server
