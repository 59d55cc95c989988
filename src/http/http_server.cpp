#include "http/http_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

#include <cassert>
#include <cerrno>
#include <cstring>
#include <latch>
#include <thread>
#include <vector>

#include "base/tcp_connect.h"
#include "base/unique_fd.h"
#include "http/http_event_loop.h"
#include "http/http_server_counters.h"
#include "http/request_id.h"

namespace th::http {

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpRouter router;
  RequestIdGenerator ids;
  HttpServerCounters counters;
  UniqueFd listener;
  int port = 0;
  std::vector<std::unique_ptr<HttpEventLoop>> loops;
  std::vector<std::thread> threads;
  bool started = false;
  bool accepting = false;
  bool stopped = false;

  Result<UniqueFd> listen_socket();
};

Result<UniqueFd> HttpServer::Impl::listen_socket() {
  TH_ASSIGN_OR_RETURN(AddrInfoList found, resolve_tcp(options.host, static_cast<uint16_t>(options.port), true));
  std::string last_error = "no address";
  UniqueFd sock;
  for (const addrinfo* a = found.get(); a; a = a->ai_next) {
    sock.reset(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!sock) {
      last_error = cat("socket: ", std::strerror(errno));
      continue;
    }
    // Restarting must not wait out TIME_WAIT of the last run's connections.
    const int one = 1;
    ::setsockopt(sock.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(sock.get(), a->ai_addr, a->ai_addrlen) != 0) {
      last_error = cat("bind: ", std::strerror(errno));
      sock.reset();
      continue;
    }
    if (::listen(sock.get(), options.backlog) != 0) {
      last_error = cat("listen: ", std::strerror(errno));
      sock.reset();
      continue;
    }
    break;
  }
  if (!sock) return Status::errorf("cannot listen on ", options.host, ":", options.port, ": ", last_error);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return Status::errorf("getsockname: ", std::strerror(errno));
  port = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                    : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return sock;
}

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}

HttpServer::~HttpServer() {
  if (impl_->started && !impl_->stopped) shutdown(std::chrono::milliseconds(0));
}

void HttpServer::route(std::string method, std::string path, Handler handler) {
  // Loops read the routes without a lock, so they are fixed once running.
  assert(!impl_->started && "HttpServer::route after start()");
  if (impl_->started) return;
  impl_->router.add(std::move(method), std::move(path), std::move(handler));
}

Status HttpServer::start() {
  Impl& s = *impl_;
  if (s.started) return Status::error("HttpServer::start: already started");
  if (s.options.threads < 1) return Status::errorf("HttpServer: threads must be >= 1, got ", s.options.threads);
  TH_ASSIGN_OR_RETURN(s.listener, s.listen_socket());
  for (int i = 0; i < s.options.threads; ++i) {
    auto loop = std::make_unique<HttpEventLoop>(s.options, s.router, s.ids, s.counters);
    TH_RETURN_IF_ERROR(loop->init(s.listener.get()));
    s.loops.push_back(std::move(loop));
  }
  for (auto& loop : s.loops)
    s.threads.emplace_back([l = loop.get()] {
      pthread_setname_np(pthread_self(), "th-http");
      l->run();
    });
  s.started = true;
  s.accepting = true;
  return ok_status();
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::stop_accepting() {
  Impl& s = *impl_;
  if (!s.started || !s.accepting) return;
  s.accepting = false;
  std::latch drained(static_cast<std::ptrdiff_t>(s.loops.size()));
  for (auto& loop : s.loops) loop->drain([&drained] { drained.count_down(); });
  drained.wait();
  s.listener.reset();  // no loop watches it any more
}

bool HttpServer::shutdown(std::chrono::milliseconds deadline) {
  Impl& s = *impl_;
  if (!s.started || s.stopped) return true;
  const auto until = std::chrono::steady_clock::now() + deadline;
  stop_accepting();
  // 5 ms polls: shutdown happens once, and a condition variable would put a
  // notify on every connection's close.
  while (s.counters.open_connections.load() > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const bool finished = s.counters.open_connections.load() == 0;
  for (auto& loop : s.loops) loop->stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
  s.stopped = true;
  return finished;
}

HttpServerStats HttpServer::stats() const { return impl_->counters.snapshot(); }

}  // namespace th::http
