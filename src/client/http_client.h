// A blocking HTTP/1.1 client for one server (a base URL), safe to share
// between threads: what the benchmark and tools use to talk to `tokenhive
// serve`.
//
//   TH_ASSIGN_OR_RETURN(auto client, HttpClient::create("http://127.0.0.1:8080", {}));
//   TH_ASSIGN_OR_RETURN(Response r, client->request("POST", "/v1/completions", body));
//   client->stream_events("POST", "/v1/completions", streamed_body, [](const SseEvent& e) {
//     ...;
//     return true;  // false stops the stream (the connection is closed)
//   });
//
// Connections: idle ones are kept (up to max_idle_connections, for at most
// max_idle_time) and reused, most recent first; one the server has closed is
// seen when it is taken (a peek finds EOF) and dropped. A request on a
// reused connection that fails before any byte of the response came (the
// server closed it just as we sent) is redone once on a new connection; that
// redo is not a retry and costs no budget, since the server cannot have
// answered it. Responses are read by Content-Length, chunked coding or the
// connection's close.
//
// Timeouts: connect_timeout per connection; request_timeout for the whole
// call (every try and every wait between tries). Retries: retry_policy.h.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"
#include "client/http_response_parser.h"
#include "client/response.h"
#include "client/response_cache.h"
#include "client/retry_policy.h"
#include "client/sse_reader.h"

namespace th::client {

struct HttpClientOptions {
  std::string bearer_token;  // sent as "Authorization: Bearer ..." when not empty
  std::chrono::milliseconds connect_timeout{5'000};
  // The whole call: tries, waits between them and, for a stream, its end.
  std::chrono::milliseconds request_timeout{600'000};
  // A 2xx stream that has delivered bytes and then gets none for this long fails (a broken
  // try, never retried here: FailoverClient resumes it elsewhere). 0: off, only
  // request_timeout. Not before the first byte: that wait holds queueing and prefill.
  std::chrono::milliseconds stream_idle_timeout{0};
  // Idle connections kept for reuse. Busy connections are not capped: a
  // thread that finds none idle opens one; past the cap it is closed when done.
  size_t max_idle_connections = 64;
  // An idle connection unused this long is closed rather than reused: a
  // server closes idle ones too (ours after 60 s, many proxies after 5-60 s).
  std::chrono::milliseconds max_idle_time{30'000};
  size_t max_response_bytes = 256u << 20;  // a body request() buffers (or an error body stream() does)
  std::string user_agent = "tokenhive-client/0.1";
  RetryOptions retry;
  ResponseCacheOptions cache;
  ResponseLimits limits;
};

/// @brief When a call must end: its deadline, and an optional flag its caller sets to stop it.
struct CallLimit {
  Clock::time_point deadline;
  const std::atomic<bool>* cancel = nullptr;
};
inline bool cancelled(const CallLimit& l) { return l.cancel && l.cancel->load(std::memory_order_relaxed); }

/// @brief The parts of a base URL: http://host[:port][/prefix].
struct BaseUrl {
  std::string host;       // a name, an IPv4 address, or an IPv6 one without brackets
  int port = 80;
  std::string authority;  // as the Host header carries it: "host:port", "[::1]:8080"
  std::string prefix;     // prepended to every path; "" or "/v1", never a trailing '/'
};

/// @brief Parses `url`; https is refused (put a TLS-terminating proxy in front).
Result<BaseUrl> parse_base_url(std::string_view url);

/// @brief Client-wide counters.
struct ClientStats {
  uint64_t requests = 0;          // calls of request()/stream() (cache hits included)
  uint64_t attempts = 0;          // tries made (a cache hit or a call refused before sending makes none)
  uint64_t retries = 0;           // tries after a call's first
  uint64_t budget_exhausted = 0;  // retries refused because the retry budget was empty
  uint64_t connections_opened = 0;
  uint64_t connections_reused = 0;
  uint64_t stale_redos = 0;       // tries redone on a new connection after a reused one failed silently
  uint64_t cache_hits = 0;
};

class HttpClient {
 public:
  /// @brief Called with each piece of a 2xx response's body as it arrives;
  /// returns false to stop (the connection is closed, not reused).
  using OnData = std::function<bool(std::string_view)>;

  static Result<std::unique_ptr<HttpClient>> create(std::string_view base_url, HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  /// @brief Sends `method` on base prefix + `path` (which starts with '/')
  /// with `body` (Content-Type application/json unless `headers` says
  /// otherwise) and reads the whole response. Any status is a Response; an
  /// error means no complete response came (after the retries there were).
  /// Content-Length, Transfer-Encoding, Connection and Host in `headers` are
  /// the client's to set and are dropped.
  /// `cancel`, when given, is checked every 10 ms while the call waits: once it is
  /// true the call ends with an error that says "cancelled" (never retried), and the
  /// connection is closed.
  Result<Response> request(std::string method, std::string path, std::string body = {},
                           std::vector<Header> headers = {}, const std::atomic<bool>* cancel = nullptr);

  /// @brief As request(), but a 2xx body goes to on_data piece by piece as it
  /// arrives (Response::body stays empty); any other status's body is
  /// buffered into Response::body, so an error can be read whole and retried.
  /// Once on_data has had a byte the call is never retried. When on_data
  /// returns false, the Response says cancelled.
  Result<Response> stream(std::string method, std::string path, std::string body, OnData on_data,
                          std::vector<Header> headers = {}, const std::atomic<bool>* cancel = nullptr);

  /// @brief stream() read as server-sent events (sse_reader.h): on_event gets
  /// each event of a 2xx response; it returns false to stop. An error also
  /// when the event stream is malformed (a line over the reader's limit).
  Result<Response> stream_events(std::string method, std::string path, std::string body,
                                 SseReader::OnEvent on_event, std::vector<Header> headers = {},
                                 const std::atomic<bool>* cancel = nullptr);

  ClientStats stats() const;
  const BaseUrl& base_url() const { return base_; }
  /// @brief Closes every idle connection.
  void close_idle();

 private:
  struct Connection;
  struct Attempt;
  HttpClient(BaseUrl base, HttpClientOptions options);

  Result<Response> execute(std::string_view method, std::string_view path, std::string_view body,
                           const std::vector<Header>& headers, const OnData* on_data, const std::atomic<bool>* cancel);
  Attempt attempt(std::string_view method, const std::string& wire, const CallLimit& deadline, const OnData* on_data);
  Attempt exchange(Connection& conn, std::string_view method, const std::string& wire, const CallLimit& deadline,
                   const OnData* on_data);
  Result<Connection> connect(const CallLimit& deadline);
  std::unique_ptr<Connection> take_idle();
  void put_idle(std::unique_ptr<Connection> conn);
  void sleep(std::chrono::milliseconds delay);

  BaseUrl base_;
  HttpClientOptions options_;
  Backoff backoff_;
  RetryBudget budget_;
  ResponseCache cache_;

  std::mutex pool_mu_;
  std::vector<std::unique_ptr<Connection>> idle_;  // most recently used last

  struct Counters {
    std::atomic<uint64_t> requests{0}, attempts{0}, retries{0}, budget_exhausted{0}, connections_opened{0},
        connections_reused{0}, stale_redos{0}, cache_hits{0};
  };
  Counters counters_;
};

}  // namespace th::client
