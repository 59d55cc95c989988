#include "http/http_event_loop.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>

#include "http/cors.h"

namespace th::http {
namespace {

constexpr uint64_t kListenerId = 1;
constexpr uint64_t kMailboxId = 2;
// One read takes up to 64 KiB: a 1 MiB body in 16 reads, and a loop's only
// read buffer (connections keep just what is left after a request).
constexpr size_t kReadChunk = 64 * 1024;
// Reads discarded per wakeup while lingering, so that a client still
// blasting a rejected body cannot hold the loop.
constexpr int kMaxDiscardReads = 16;
constexpr int kMaxAcceptsPerWakeup = 64;
constexpr int kMaxEvents = 256;
// Out of descriptors: stop accepting this long, or the level-triggered
// listener would wake the loop in a busy spin.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);
// Output buffers larger than this are freed once written, so that an idle
// connection holds no large allocation after a big response.
constexpr size_t kKeepBufferBytes = 64 * 1024;

std::string busy_response() {
  HttpResponse r = error_response(503, "too many open connections; try again later");
  set_retry_after(r, std::chrono::seconds(1));
  return serialize_head(r.status, r.headers, BodyFraming::kContentLength, r.body.size(), false, 1, "") + r.body;
}

}  // namespace

HttpEventLoop::HttpEventLoop(const HttpServerOptions& options, const HttpRouter& router, RequestIdGenerator& ids,
                             HttpServerCounters& counters)
    : options_(options), router_(router), ids_(ids), counters_(counters), read_buffer_(kReadChunk) {}

HttpEventLoop::~HttpEventLoop() {
  if (mailbox_) mailbox_->close();
}

Status HttpEventLoop::init(int listen_fd) {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) return Status::errorf("epoll_create1: ", std::strerror(errno));
  auto mailbox = LoopMailbox::create();
  if (!mailbox.ok()) return mailbox.status();
  mailbox_ = std::move(mailbox).value();
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kMailboxId;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, mailbox_->fd(), &ev) != 0)
    return Status::errorf("epoll_ctl(eventfd): ", std::strerror(errno));
  listen_fd_ = listen_fd;
  set_accepting(true);
  if (!accepting_) return Status::errorf("epoll_ctl(listener): ", std::strerror(errno));
  return ok_status();
}

void HttpEventLoop::set_accepting(bool on) {
  if (on == accepting_ || listen_fd_ < 0) return;
  if (on) {
    // EPOLLEXCLUSIVE: a connection wakes one loop, not all of them.
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLEXCLUSIVE;
    ev.data.u64 = kListenerId;
    accepting_ = ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listen_fd_, &ev) == 0;
  } else {
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, listen_fd_, nullptr);
    accepting_ = false;
  }
}

void HttpEventLoop::run() {
  mailbox_->set_loop_thread(std::this_thread::get_id());
  epoll_event events[kMaxEvents];
  while (!stopping_) {
    const int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, wait_timeout_ms());
    now_ = Clock::now();
    if (n < 0 && errno != EINTR) {
      std::fprintf(stderr, "http: epoll_wait: %s\n", std::strerror(errno));
      break;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kListenerId) {
        accept_connections();
      } else if (id == kMailboxId) {
        mailbox_->drain_wakeups();  // the mail itself is taken below
      } else if (auto it = connections_.find(id); it != connections_.end()) {
        on_event(*it->second, events[i].events);
      }
    }
    take_mail();
    expire_deadlines();
    if (!accepting_ && !draining_ && accept_resume_at_ != Clock::time_point{} && now_ >= accept_resume_at_) {
      accept_resume_at_ = {};
      set_accepting(true);
    }
    graveyard_.clear();
  }
  // Stopped: every connection goes, and with it every response in progress.
  now_ = Clock::now();
  set_accepting(false);
  std::vector<Connection*> all;
  for (auto& [id, c] : connections_) all.push_back(c.get());
  for (Connection* c : all) close(*c);
  graveyard_.clear();
  take_mail();  // run tasks posted meanwhile (drain's completion callbacks)
  mailbox_->close();
}

void HttpEventLoop::drain(std::function<void()> done) {
  auto task = [this, done] {
    draining_ = true;
    mailbox_->set_draining();
    set_accepting(false);
    accept_resume_at_ = {};
    std::vector<Connection*> idle;
    for (auto& [id, c] : connections_) {
      if (c->state == State::kReading && !c->parser.started() && c->in.empty()) idle.push_back(c.get());
      else if (c->state == State::kHandling) c->close_after_response = true;
    }
    for (Connection* c : idle) close(*c);
    if (done) done();
  };
  if (!mailbox_->post_task(std::move(task)) && done) done();
}

void HttpEventLoop::stop() {
  mailbox_->post_task([this] { stopping_ = true; });
}

int HttpEventLoop::wait_timeout_ms() const {
  Clock::time_point next = Clock::time_point::max();
  if (!deadlines_.empty()) next = deadlines_.begin()->first;
  if (accept_resume_at_ != Clock::time_point{}) next = std::min(next, accept_resume_at_);
  if (next == Clock::time_point::max()) return -1;
  const auto wait = next - Clock::now();
  if (wait <= Clock::duration::zero()) return 0;
  // Rounded up: waking a little early would only spin until the deadline.
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(wait).count();
  return static_cast<int>(std::min<int64_t>(ms, 3'600'000));
}

namespace {

// "address:port" ("[address]:port" for IPv6) of an accepted peer, for logs; "" if unknown.
std::string peer_name(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    if (!::inet_ntop(AF_INET, &v4.sin_addr, host, sizeof host)) return "";
    return std::string(host) + ":" + std::to_string(ntohs(v4.sin_port));
  }
  if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    if (!::inet_ntop(AF_INET6, &v6.sin6_addr, host, sizeof host)) return "";
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(v6.sin6_port));
  }
  return "";
}

}  // namespace

void HttpEventLoop::accept_connections() {
  for (int i = 0; i < kMaxAcceptsPerWakeup && accepting_; ++i) {
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof peer;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        std::fprintf(stderr, "http: accept: %s; pausing accepts for %lld ms\n", std::strerror(errno),
                     static_cast<long long>(kAcceptBackoff.count()));
        set_accepting(false);
        accept_resume_at_ = now_ + kAcceptBackoff;
      }
      return;  // EAGAIN: none left (or another loop took it)
    }
    UniqueFd sock(fd);
    counters_.accepted.fetch_add(1, std::memory_order_relaxed);
    if (counters_.open_connections.fetch_add(1) >= options_.max_connections) {
      counters_.open_connections.fetch_sub(1);
      counters_.rejected.fetch_add(1, std::memory_order_relaxed);
      const std::string busy = busy_response();
      [[maybe_unused]] ssize_t n = ::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      continue;
    }
    // Token streams are many small writes: without TCP_NODELAY, Nagle's
    // algorithm and delayed ACKs hold each one up to 40 ms.
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto conn = std::make_unique<Connection>(options_.limits);
    conn->id = next_id_++;
    conn->fd = std::move(sock);
    conn->peer = peer_name(peer);
    // Edge-triggered: one registration for the connection's life, no
    // epoll_ctl per request; every handler reads or writes until EAGAIN.
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.u64 = conn->id;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      counters_.open_connections.fetch_sub(1);
      continue;
    }
    open_.fetch_add(1);
    Connection& c = *conn;
    connections_.emplace(c.id, std::move(conn));
    // A new connection owes its first request's first byte within the header timeout.
    set_deadline(c, Deadline::kIdle, options_.header_timeout);
  }
}

void HttpEventLoop::on_event(Connection& c, uint32_t events) {
  if (events & EPOLLERR) {
    close(c);
    return;
  }
  const bool peer_closed = events & (EPOLLRDHUP | EPOLLHUP);
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) {
    switch (c.state) {
      case State::kReading:
        read_requests(c);
        break;
      case State::kLingering:
        discard_input(c);
        break;
      case State::kHandling:
        // The client closed its side while its response is in progress: it
        // is gone, and the request is cancelled (nginx does the same, 499).
        // Input that is not EOF waits: it is the next pipelined request.
        if (peer_closed) {
          close(c);
          return;
        }
        break;
      case State::kClosing:
        if (events & EPOLLHUP) {
          close(c);
          return;
        }
        break;
    }
  }
  if (c.closed) return;
  if (events & EPOLLOUT) flush(c);
}

void HttpEventLoop::read_requests(Connection& c) {
  if (!c.in.empty()) {
    std::string pending;
    pending.swap(c.in);
    const size_t used = parse(c, pending);
    if (c.closed) return;
    if (c.state == State::kHandling && used < pending.size()) c.in.assign(pending, used, std::string::npos);
    if (c.state != State::kReading) return;
  }
  while (c.state == State::kReading) {
    const ssize_t n = ::recv(c.fd.get(), read_buffer_.data(), read_buffer_.size(), 0);
    if (n > 0) {
      const std::string_view data(read_buffer_.data(), static_cast<size_t>(n));
      const size_t used = parse(c, data);
      if (c.closed) return;
      if (c.state == State::kHandling && used < data.size()) c.in.assign(data.substr(used));
      continue;
    }
    if (n == 0) {
      close(c);  // the client is done; a partial request goes with it
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) close(c);
    return;
  }
}

size_t HttpEventLoop::parse(Connection& c, std::string_view data) {
  const size_t used = c.parser.feed(data);
  switch (c.parser.state()) {
    case HttpRequestParser::State::kComplete:
      dispatch(c, c.parser.take());
      return used;
    case HttpRequestParser::State::kError:
      counters_.bad_requests.fetch_add(1, std::memory_order_relaxed);
      fail_connection(c, c.parser.error().status, c.parser.error().reason);
      return used;
    case HttpRequestParser::State::kNeedMore:
      break;
  }
  if (c.parser.in_body()) {
    if (c.deadline != Deadline::kBody) set_deadline(c, Deadline::kBody, options_.body_timeout);
    if (c.parser.expects_continue() && !c.continue_sent) {
      c.continue_sent = true;
      c.out += "HTTP/1.1 100 Continue\r\n\r\n";
      flush(c);
    }
  } else if (c.parser.started() && c.deadline != Deadline::kHeader) {
    set_deadline(c, Deadline::kHeader, options_.header_timeout);
  }
  return used;
}

void HttpEventLoop::dispatch(Connection& c, HttpRequest request) {
  request.id = ids_.next();
  request.peer = c.peer;
  counters_.requests.fetch_add(1, std::memory_order_relaxed);
  counters_.in_flight.fetch_add(1);
  clear_deadline(c);
  c.state = State::kHandling;
  c.response_done = false;
  c.continue_sent = false;
  const bool keep_alive = request.keep_alive && !draining_;
  c.close_after_response = !keep_alive;
  c.exchange = std::make_shared<ResponseExchange>(mailbox_, c.id, request.id, request.version_minor, keep_alive);
  ResponseWriter writer(c.exchange);
  if (std::optional<std::string> origin = cors_allowed_origin(options_.cors_origins, request)) {
    if (is_cors_preflight(request)) {
      writer.send(cors_preflight_response(*origin));
      return;
    }
    c.exchange->add_headers(cors_headers(*origin));
  }
  const HttpRouter::Match match = router_.find(request.method, request.path);
  if (!match.handler) {
    HttpResponse r = match.status == 404
                         ? error_response(404, "no route for " + request.path)
                         : error_response(405, "method " + request.method + " is not allowed on " + request.path);
    if (match.status == 405) r.set_header("Allow", match.allow);
    writer.send(std::move(r));
    return;
  }
  try {
    (*match.handler)(request, std::move(writer));
  } catch (const std::exception& e) {
    // The writer's last copy went with the unwinding: the client gets a 500.
    std::fprintf(stderr, "http: handler for %s %s threw: %s\n", request.method.c_str(), request.path.c_str(),
                 e.what());
  } catch (...) {
    std::fprintf(stderr, "http: handler for %s %s threw\n", request.method.c_str(), request.path.c_str());
  }
}

void HttpEventLoop::fail_connection(Connection& c, int status, const char* reason) {
  HttpResponse r = error_response(status, reason);
  c.out += serialize_head(r.status, r.headers, BodyFraming::kContentLength, r.body.size(), false, 1, "");
  c.out += r.body;
  c.state = State::kClosing;
  set_deadline(c, Deadline::kLinger, options_.linger_timeout);
  flush(c);
}

void HttpEventLoop::flush(Connection& c) {
  bool progressed = false;
  while (c.out_sent < c.out.size()) {
    const ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_sent += static_cast<size_t>(n);
      progressed = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    close(c);  // EPIPE, ECONNRESET: the client is gone
    return;
  }
  const size_t unsent = c.out.size() - c.out_sent;
  if (unsent == 0) {
    c.out.clear();
    c.out_sent = 0;
    if (c.out.capacity() > kKeepBufferBytes) std::string().swap(c.out);
  } else if (c.out_sent >= kKeepBufferBytes && c.out_sent * 2 >= c.out.size()) {
    c.out.erase(0, c.out_sent);  // amortized: at most one copy per half buffer written
    c.out_sent = 0;
  }
  if (c.exchange) c.exchange->set_unsent(unsent);
  if (c.state == State::kHandling) {
    // A stream the client does not read is cut off; a complete response is
    // bounded by its own size and may wait for the write timeout.
    if (!c.response_done && unsent > options_.max_write_buffer_bytes) {
      counters_.timeouts.fetch_add(1, std::memory_order_relaxed);
      close(c);
      return;
    }
    if (unsent > 0 && (progressed || c.deadline != Deadline::kWrite)) {
      set_deadline(c, Deadline::kWrite, options_.write_timeout);
    } else if (unsent == 0 && c.deadline == Deadline::kWrite) {
      clear_deadline(c);
    }
    if (unsent == 0 && c.response_done) finish_response(c);
  } else if (c.state == State::kClosing && unsent == 0) {
    begin_linger(c);
  }
}

void HttpEventLoop::finish_response(Connection& c) {
  counters_.in_flight.fetch_sub(1);
  c.exchange.reset();
  c.response_done = false;
  if (c.close_after_response || draining_) {
    begin_linger(c);
    return;
  }
  c.state = State::kReading;
  set_deadline(c, Deadline::kIdle, options_.idle_timeout);
  read_requests(c);  // a pipelined request may be waiting, here or in the socket
}

void HttpEventLoop::begin_linger(Connection& c) {
  // Half-close and read until the client closes too: closing with unread
  // input would send a reset that can destroy the response in flight.
  c.state = State::kLingering;
  ::shutdown(c.fd.get(), SHUT_WR);
  set_deadline(c, Deadline::kLinger, options_.linger_timeout);
  discard_input(c);
}

void HttpEventLoop::discard_input(Connection& c) {
  for (int i = 0; i < kMaxDiscardReads; ++i) {
    const ssize_t n = ::recv(c.fd.get(), read_buffer_.data(), read_buffer_.size(), 0);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    close(c);  // EOF or an error: done
    return;
  }
}

void HttpEventLoop::close(Connection& c) {
  if (c.closed) return;
  c.closed = true;
  clear_deadline(c);
  c.fd.reset();  // also leaves the epoll set
  counters_.open_connections.fetch_sub(1);
  open_.fetch_sub(1);
  std::shared_ptr<ResponseExchange> exchange = std::move(c.exchange);
  auto it = connections_.find(c.id);
  graveyard_.push_back(std::move(it->second));  // `c` stays valid for the callers above us
  connections_.erase(it);
  if (exchange) {
    counters_.in_flight.fetch_sub(1);
    exchange->mark_closed();  // runs the handler's on_close
  }
}

void HttpEventLoop::take_mail() {
  while (mailbox_->take(mail_exchanges_, mail_tasks_)) {
    for (auto& task : mail_tasks_) task();
    for (const auto& exchange : mail_exchanges_) on_output(exchange);
  }
}

void HttpEventLoop::on_output(const std::shared_ptr<ResponseExchange>& exchange) {
  auto it = connections_.find(exchange->connection_id());
  if (it == connections_.end() || it->second->exchange != exchange) {
    exchange->take_output();  // the connection is gone; the bytes go nowhere
    return;
  }
  Connection& c = *it->second;
  ResponseExchange::Output o = exchange->take_output();
  if (c.out.empty()) c.out.swap(o.bytes);
  else c.out += o.bytes;
  if (o.done) {
    c.response_done = true;
    if (o.close_after) c.close_after_response = true;
  }
  flush(c);
}

void HttpEventLoop::expire_deadlines() {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now_) {
    const uint64_t id = deadlines_.begin()->second;
    auto it = connections_.find(id);
    if (it == connections_.end()) {
      deadlines_.erase(deadlines_.begin());
      continue;
    }
    Connection& c = *it->second;
    const Deadline kind = c.deadline;
    clear_deadline(c);
    switch (kind) {
      case Deadline::kHeader:
      case Deadline::kBody:
        counters_.timeouts.fetch_add(1, std::memory_order_relaxed);
        fail_connection(c, 408, kind == Deadline::kHeader ? "request headers not received in time"
                                                          : "request body not received in time");
        break;
      case Deadline::kWrite:
        counters_.timeouts.fetch_add(1, std::memory_order_relaxed);
        close(c);
        break;
      case Deadline::kIdle:
      case Deadline::kLinger:
        close(c);
        break;
      case Deadline::kNone:
        break;
    }
  }
}

void HttpEventLoop::set_deadline(Connection& c, Deadline kind, Clock::duration after) {
  clear_deadline(c);
  c.deadline = kind;
  c.deadline_at = now_ + after;
  deadlines_.emplace(c.deadline_at, c.id);
}

void HttpEventLoop::clear_deadline(Connection& c) {
  if (c.deadline == Deadline::kNone) return;
  deadlines_.erase({c.deadline_at, c.id});
  c.deadline = Deadline::kNone;
}

}  // namespace th::http
