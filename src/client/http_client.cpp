#include "client/http_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "base/tcp_connect.h"

namespace th::client {

namespace {

bool is_tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }

// Milliseconds until `deadline`, rounded up, at least 0 (a poll timeout).
int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

enum class Wait { kReady, kTimeout, kCancelled };

// Waits until `fd` has `events`, `until.deadline` passes, or *until.cancel turns true
// (checked every 10 ms while waiting).
Wait wait_fd(int fd, short events, const CallLimit& until) {
  while (true) {
    if (until.cancel && until.cancel->load(std::memory_order_relaxed)) return Wait::kCancelled;
    pollfd p{fd, events, 0};
    int timeout = ms_until(until.deadline);
    if (until.cancel) timeout = std::min(timeout, 10);
    const int n = ::poll(&p, 1, timeout);
    if (n > 0) return Wait::kReady;
    if (n == 0) {
      if (Clock::now() >= until.deadline) return Wait::kTimeout;
      continue;
    }
    if (errno != EINTR) return Wait::kReady;  // let the next call report the error
  }
}

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

Result<BaseUrl> parse_base_url(std::string_view url) {
  const std::string lower = to_lower_ascii(url.substr(0, 8));
  if (lower.rfind("https://", 0) == 0)
    return Status::errorf("base URL ", url, ": https is not supported (use http, or a TLS-terminating proxy)");
  if (lower.rfind("http://", 0) != 0) return Status::errorf("base URL ", url, ": must start with http://");
  std::string_view rest = url.substr(7);
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (path.find_first_of("?#") != std::string_view::npos || authority.find_first_of("?#@") != std::string_view::npos)
    return Status::errorf("base URL ", url, ": user info, query and fragment are not supported");
  BaseUrl out;
  out.authority = std::string(authority);
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return Status::errorf("base URL ", url, ": unclosed '[' in the host");
    out.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return Status::errorf("base URL ", url, ": bad port");
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (out.host.empty()) return Status::errorf("base URL ", url, ": no host");
  if (!port.empty() || authority.find(':') != std::string_view::npos) {
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535)
      return Status::errorf("base URL ", url, ": bad port");
    out.port = std::stoi(std::string(port));
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  out.prefix = std::string(path);
  return out;
}

struct HttpClient::Connection {
  UniqueFd fd;
  Clock::time_point idle_since;
};

enum class Failure {
  kNone,        // a complete response (or a stream the caller stopped)
  kConnect,     // no connection: refused, unreachable, timed out, no address
  kNoResponse,  // the connection closed or reset before any byte of a response
  kTimeout,     // the call's deadline passed
  kProtocol,    // a malformed response
  kBroken,      // the connection broke after the response began
  kTooLarge,    // a buffered body over max_response_bytes
  kCancelled,   // the caller's cancel flag turned true
};

struct HttpClient::Attempt {
  Failure failure = Failure::kNone;
  Status error;
  Response response;
  bool delivered = false;  // on_data has had bytes
  bool reusable = false;   // the connection may carry another request

  static Attempt fail(Failure f, Status s) {
    Attempt a;
    a.failure = f;
    a.error = std::move(s);
    return a;
  }
};

Result<std::unique_ptr<HttpClient>> HttpClient::create(std::string_view base_url, HttpClientOptions options) {
  TH_ASSIGN_OR_RETURN(BaseUrl base, parse_base_url(base_url));
  if (options.retry.max_attempts < 1) return Status::error("retry.max_attempts must be at least 1");
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(base), std::move(options)));
}

HttpClient::HttpClient(BaseUrl base, HttpClientOptions options)
    : base_(std::move(base)),
      options_(std::move(options)),
      backoff_(options_.retry.base_delay, options_.retry.max_delay, options_.retry.seed),
      budget_(options_.retry.budget, Clock::now()),
      cache_(options_.cache) {}

HttpClient::~HttpClient() = default;

ClientStats HttpClient::stats() const {
  ClientStats s;
  s.requests = counters_.requests.load();
  s.attempts = counters_.attempts.load();
  s.retries = counters_.retries.load();
  s.budget_exhausted = counters_.budget_exhausted.load();
  s.connections_opened = counters_.connections_opened.load();
  s.connections_reused = counters_.connections_reused.load();
  s.stale_redos = counters_.stale_redos.load();
  s.cache_hits = counters_.cache_hits.load();
  return s;
}

void HttpClient::close_idle() {
  std::vector<std::unique_ptr<Connection>> idle;
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    idle.swap(idle_);
  }
}

Result<HttpClient::Connection> HttpClient::connect(const CallLimit& limit) {
  const TcpConnectLimit until{std::min(limit.deadline, Clock::now() + options_.connect_timeout), limit.cancel};
  TH_ASSIGN_OR_RETURN(UniqueFd fd, connect_tcp(base_.host, static_cast<uint16_t>(base_.port), until));
  counters_.connections_opened.fetch_add(1, std::memory_order_relaxed);
  return Connection{std::move(fd), Clock::now()};
}

std::unique_ptr<HttpClient::Connection> HttpClient::take_idle() {
  while (true) {
    std::unique_ptr<Connection> conn;
    {
      std::lock_guard<std::mutex> lock(pool_mu_);
      if (idle_.empty()) return nullptr;
      conn = std::move(idle_.back());
      idle_.pop_back();
    }
    if (Clock::now() - conn->idle_since > options_.max_idle_time) continue;
    // An idle connection has nothing to read: readable means the server
    // closed it (EOF, reset) or sent something unasked; either way it is done.
    pollfd p{conn->fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) != 0) continue;
    counters_.connections_reused.fetch_add(1, std::memory_order_relaxed);
    return conn;
  }
}

void HttpClient::put_idle(std::unique_ptr<Connection> conn) {
  conn->idle_since = Clock::now();
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (idle_.size() < options_.max_idle_connections) idle_.push_back(std::move(conn));
}

HttpClient::Attempt HttpClient::exchange(Connection& conn, std::string_view method, const std::string& wire,
                                         const CallLimit& deadline, const OnData* on_data) {
  const int fd = conn.fd.get();
  for (size_t off = 0; off < wire.size();) {
    const ssize_t n = ::send(fd, wire.data() + off, wire.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (const Wait w = wait_fd(fd, POLLOUT, deadline); w != Wait::kReady)
        return w == Wait::kCancelled ? Attempt::fail(Failure::kCancelled, Status::error("cancelled"))
                                     : Attempt::fail(Failure::kTimeout, Status::error("timed out sending the request"));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return Attempt::fail(Failure::kNoResponse, Status::errorf("send: ", errno_text(errno)));
    }
  }

  Attempt a;
  HttpResponseParser parser(options_.limits);
  parser.reset(method);
  std::string piece;
  bool any_byte = false;
  Clock::time_point last_byte = Clock::now();
  bool leftover = false;
  char buf[32 * 1024];
  while (!parser.done()) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) {
      if (!any_byte) return Attempt::fail(Failure::kNoResponse, Status::error("connection closed before a response"));
      if (Status s = parser.finish_at_eof(); !s.ok()) return Attempt::fail(Failure::kBroken, s);
      break;
    }
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) {
        // Mid-stream, an endpoint that stops sending (hung, SIGSTOPped) fails after the idle timeout.
        CallLimit until = deadline;
        const bool idle_bound = a.delivered && options_.stream_idle_timeout.count() > 0 &&
                                last_byte + options_.stream_idle_timeout < deadline.deadline;
        if (idle_bound) until.deadline = last_byte + options_.stream_idle_timeout;
        if (const Wait w = wait_fd(fd, POLLIN, until); w != Wait::kReady) {
          if (w == Wait::kTimeout && idle_bound) {
            Attempt idle = Attempt::fail(Failure::kBroken, Status::errorf("the stream sent nothing for ",
                                                                          options_.stream_idle_timeout.count(),
                                                                          " ms (stream_idle_timeout)"));
            idle.delivered = true;
            return idle;
          }
          Attempt stopped = w == Wait::kCancelled
                                ? Attempt::fail(Failure::kCancelled, Status::error("cancelled"))
                                : Attempt::fail(Failure::kTimeout, Status::errorf("no complete response within the request timeout (",
                                                                                  options_.request_timeout.count(), " ms)"));
          stopped.delivered = a.delivered;
          return stopped;
        }
        continue;
      }
      if (!any_byte) return Attempt::fail(Failure::kNoResponse, Status::errorf("recv: ", errno_text(err)));
      Attempt broken = Attempt::fail(Failure::kBroken, Status::errorf("recv: ", errno_text(err)));
      broken.delivered = a.delivered;
      return broken;
    }
    any_byte = true;
    last_byte = Clock::now();
    std::string_view data(buf, static_cast<size_t>(n));
    while (!data.empty() && !parser.done()) {
      Result<size_t> used = parser.feed(data, &piece);
      if (!used.ok()) return Attempt::fail(Failure::kProtocol, Status::errorf("bad response: ", used.message()));
      data.remove_prefix(*used);
      if (piece.empty()) continue;
      if (on_data != nullptr && parser.status() >= 200 && parser.status() < 300) {
        a.delivered = true;
        if (!(*on_data)(piece)) {
          a.response.status = parser.status();
          a.response.headers = parser.headers();
          a.response.cancelled = true;
          return a;  // not reusable: the rest of the body is still coming
        }
      } else {
        a.response.body += piece;
        if (a.response.body.size() > options_.max_response_bytes)
          return Attempt::fail(Failure::kTooLarge, Status::errorf("response body over ", options_.max_response_bytes, " bytes"));
      }
      piece.clear();
    }
    leftover = !data.empty();
  }
  a.response.status = parser.status();
  a.response.headers = parser.headers();
  // Bytes after the response were never asked for: the connection's framing
  // can no longer be trusted.
  a.reusable = parser.keep_alive() && !leftover;
  return a;
}

HttpClient::Attempt HttpClient::attempt(std::string_view method, const std::string& wire, const CallLimit& deadline,
                                        const OnData* on_data) {
  std::unique_ptr<Connection> conn = take_idle();
  const bool reused = conn != nullptr;
  if (!reused) {
    Result<Connection> c = connect(deadline);
    if (!c.ok()) return Attempt::fail(cancelled(deadline) ? Failure::kCancelled : Failure::kConnect, c.status());
    conn = std::make_unique<Connection>(std::move(c).value());
  }
  Attempt a = exchange(*conn, method, wire, deadline, on_data);
  if (reused && a.failure == Failure::kNoResponse) {
    // The server closed the idle connection as we sent on it: it never saw
    // the request, so a new connection is the same try, not a retry.
    counters_.stale_redos.fetch_add(1, std::memory_order_relaxed);
    Result<Connection> c = connect(deadline);
    if (!c.ok()) return Attempt::fail(cancelled(deadline) ? Failure::kCancelled : Failure::kConnect, c.status());
    conn = std::make_unique<Connection>(std::move(c).value());
    a = exchange(*conn, method, wire, deadline, on_data);
  }
  if (a.failure == Failure::kNone && a.reusable) put_idle(std::move(conn));
  return a;
}

void HttpClient::sleep(std::chrono::milliseconds delay) {
  if (options_.retry.sleep) {
    options_.retry.sleep(delay);
  } else {
    std::this_thread::sleep_for(delay);
  }
}

Result<Response> HttpClient::execute(std::string_view method, std::string_view path, std::string_view body,
                                     const std::vector<Header>& headers, const OnData* on_data,
                                     const std::atomic<bool>* cancel) {
  counters_.requests.fetch_add(1, std::memory_order_relaxed);
  const Clock::time_point start = Clock::now();
  const CallLimit deadline{start + options_.request_timeout, cancel};
  budget_.on_request(start);
  if (!is_token(method)) return Status::errorf("bad method: ", method);
  if (path.empty() || path.front() != '/' || path.find_first_of(" \r\n\t") != std::string_view::npos)
    return Status::errorf("bad path (it must start with '/', without spaces): ", path);

  std::optional<std::string> cache_key;
  if (on_data == nullptr && options_.cache.enabled) {
    cache_key = ResponseCache::key_for(method, path, body, headers);
    if (cache_key) {
      if (std::optional<Response> hit = cache_.get(*cache_key)) {
        counters_.cache_hits.fetch_add(1, std::memory_order_relaxed);
        hit->from_cache = true;
        hit->attempts = 0;
        return std::move(*hit);
      }
    }
  }

  std::string wire;
  wire.reserve(256 + body.size());
  wire.append(method).append(" ").append(base_.prefix).append(path).append(" HTTP/1.1\r\nHost: ").append(base_.authority);
  wire += "\r\n";
  bool has_type = false, has_agent = false, has_auth = false;
  for (const Header& h : headers) {
    if (!is_token(h.name) || h.value.find_first_of("\r\n", 0) != std::string::npos || h.value.find('\0') != std::string::npos)
      return Status::errorf("bad header: ", h.name);
    const std::string name = to_lower_ascii(h.name);
    if (name == "content-length" || name == "transfer-encoding" || name == "connection" || name == "host") continue;
    has_type = has_type || name == "content-type";
    has_agent = has_agent || name == "user-agent";
    has_auth = has_auth || name == "authorization";
    wire.append(h.name).append(": ").append(h.value).append("\r\n");
  }
  if (!has_agent && !options_.user_agent.empty()) wire.append("User-Agent: ").append(options_.user_agent).append("\r\n");
  if (!has_auth && !options_.bearer_token.empty())
    wire.append("Authorization: Bearer ").append(options_.bearer_token).append("\r\n");
  if (!body.empty() && !has_type) wire += "Content-Type: application/json\r\n";
  if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH")
    wire.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  wire += "\r\n";
  wire.append(body);

  const RetryOptions& retry = options_.retry;
  int tries = 0;
  Attempt last;
  while (true) {
    ++tries;
    counters_.attempts.fetch_add(1, std::memory_order_relaxed);
    last = attempt(method, wire, deadline, on_data);
    const bool retryable =
        last.failure == Failure::kConnect || last.failure == Failure::kNoResponse ||
        (last.failure == Failure::kNone && !last.delivered && !last.response.cancelled &&
         is_retryable_status(last.response.status));
    if (!retryable || tries >= retry.max_attempts) break;
    std::chrono::milliseconds delay;
    std::optional<std::chrono::milliseconds> retry_after;
    if (last.failure == Failure::kNone) {
      if (std::optional<std::string_view> v = last.response.header("retry-after"))
        retry_after = parse_retry_after(*v, std::chrono::system_clock::now());
    }
    if (retry_after) {
      if (*retry_after > retry.max_delay) break;  // the server wants more time than we wait: give its answer back
      delay = *retry_after;
    } else {
      delay = backoff_.delay(tries - 1);
    }
    if (Clock::now() + delay >= deadline.deadline || cancelled(deadline)) break;
    if (!budget_.try_spend(Clock::now())) {
      counters_.budget_exhausted.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    counters_.retries.fetch_add(1, std::memory_order_relaxed);
    sleep(delay);
  }
  if (last.failure == Failure::kNone) {
    last.response.attempts = tries;
    if (cache_key) cache_.put(*cache_key, last.response);
    return std::move(last.response);
  }
  return Status::errorf(method, " ", base_.authority, base_.prefix, path, ": ", last.error.message(),
                        tries > 1 ? cat(" (", tries, " attempts)") : std::string());
}

Result<Response> HttpClient::request(std::string method, std::string path, std::string body,
                                     std::vector<Header> headers, const std::atomic<bool>* cancel) {
  return execute(method, path, body, headers, nullptr, cancel);
}

Result<Response> HttpClient::stream(std::string method, std::string path, std::string body, OnData on_data,
                                    std::vector<Header> headers, const std::atomic<bool>* cancel) {
  if (!on_data) return Status::error("stream: no on_data callback");
  return execute(method, path, body, headers, &on_data, cancel);
}

Result<Response> HttpClient::stream_events(std::string method, std::string path, std::string body,
                                           SseReader::OnEvent on_event, std::vector<Header> headers,
                                           const std::atomic<bool>* cancel) {
  if (!on_event) return Status::error("stream_events: no on_event callback");
  const bool has_accept = std::any_of(headers.begin(), headers.end(),
                                      [](const Header& h) { return to_lower_ascii(h.name) == "accept"; });
  if (!has_accept) headers.push_back({"Accept", "text/event-stream"});
  // One reader serves every try: on_data sees only a 2xx body, and no try follows one that delivered data.
  SseReader reader;
  Status sse_error;
  OnData on_data = [&](std::string_view bytes) {
    Status s = reader.feed(bytes, on_event);
    if (!s.ok()) {
      sse_error = s;
      return false;
    }
    return !reader.stopped();
  };
  Result<Response> r = execute(method, path, body, headers, &on_data, cancel);
  if (!sse_error.ok()) return sse_error;
  return r;
}

}  // namespace th::client
