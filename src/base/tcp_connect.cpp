#include "base/tcp_connect.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace th {
namespace {

using Clock = std::chrono::steady_clock;

bool cancelled(const std::atomic<bool>* cancel) { return cancel != nullptr && cancel->load(std::memory_order_relaxed); }

// 1 when writable (connected or failed), 0 on the deadline, -1 when cancelled.
int wait_writable(int fd, TcpConnectLimit limit) {
  constexpr auto kSlice = std::chrono::milliseconds(10);
  while (true) {
    if (cancelled(limit.cancel)) return -1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(limit.deadline - Clock::now());
    if (left.count() <= 0) return 0;
    pollfd p{fd, POLLOUT, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min(left, kSlice).count()) + 1);
    if (n > 0) return 1;
    if (n < 0 && errno != EINTR) return 1;  // getsockopt says what failed
  }
}

}  // namespace

Result<AddrInfoList> resolve_tcp(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const char* node = passive && host.empty() ? nullptr : host.c_str();
  if (const int rc = ::getaddrinfo(node, service.c_str(), &hints, &found); rc != 0)
    return Status::errorf("cannot resolve ", host, ": ", ::gai_strerror(rc));
  return AddrInfoList(found, &::freeaddrinfo);
}

Result<UniqueFd> connect_tcp(const std::string& host, uint16_t port, TcpConnectLimit limit) {
  TH_ASSIGN_OR_RETURN(AddrInfoList addrs, resolve_tcp(host, port, false));
  std::string last_error = "no address";
  for (const addrinfo* ai = addrs.get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd) {
      last_error = std::strerror(errno);
      continue;
    }
    int err = 0;
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        const int w = wait_writable(fd.get(), limit);
        if (w < 0) return Status::error("cancelled");
        if (w == 0) {
          last_error = "timed out";
          continue;
        }
        socklen_t len = sizeof err;
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err != 0) {
      last_error = std::strerror(err);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }
  const bool v6 = host.find(':') != std::string::npos;
  return Status::errorf("connect to ", v6 ? "[" : "", host, v6 ? "]:" : ":", port, ": ", last_error);
}

}  // namespace th
