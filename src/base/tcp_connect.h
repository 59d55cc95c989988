// Name lookup and TCP connect, one definition for every client of ours (the
// HTTP client, the etcd watch) and the lookup for the server's listener.
#pragma once

#include <netdb.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"

namespace th {

using AddrInfoList = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;

/// @brief getaddrinfo for a TCP stream socket on `port` (numeric); `passive` for a listener
/// (an empty host is then every address). The error names the host.
Result<AddrInfoList> resolve_tcp(const std::string& host, uint16_t port, bool passive);

struct TcpConnectLimit {
  std::chrono::steady_clock::time_point deadline;
  const std::atomic<bool>* cancel = nullptr;  // checked every 10 ms while connecting
};

/// @brief A non-blocking, close-on-exec TCP socket with TCP_NODELAY, connected to the first
/// address of `host` that answers before `limit.deadline`. Errors: "cancelled" when the cancel
/// flag was set; else "connect to AUTHORITY: <the last address's failure>".
Result<UniqueFd> connect_tcp(const std::string& host, uint16_t port, TcpConnectLimit limit);

}  // namespace th
