// A tiny blocking HTTP/1.1 client for the server tests: real sockets on
// 127.0.0.1, every read bounded by a receive timeout, responses read by
// Content-Length, chunked coding or connection close.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace th::test {

struct HttpReply {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;

  std::string header(std::string_view name) const {
    for (const auto& [n, v] : headers)
      if (n == name) return v;
    return {};
  }
  bool has_header(std::string_view name) const {
    for (const auto& [n, v] : headers)
      if (n == name) return true;
    return false;
  }
};

class TestConnection {
 public:
  explicit TestConnection(int port, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval tv{};
    tv.tv_sec = timeout.count() / 1000;
    tv.tv_usec = (timeout.count() % 1000) * 1000;
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~TestConnection() { close(); }
  TestConnection(const TestConnection&) = delete;
  TestConnection& operator=(const TestConnection&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  /// Reads one response; nullopt on a timeout, an error or EOF before it was complete.
  /// 1xx responses are returned like any other.
  std::optional<HttpReply> read_response() {
    size_t head_end;
    while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos)
      if (!fill()) return std::nullopt;
    HttpReply r;
    const std::string head = buf_.substr(0, head_end);
    buf_.erase(0, head_end + 4);
    size_t line_end = head.find("\r\n");
    const std::string status_line = head.substr(0, line_end);
    if (status_line.size() < 12 || status_line.compare(0, 5, "HTTP/") != 0) return std::nullopt;
    r.status = std::stoi(status_line.substr(9, 3));
    while (line_end != std::string::npos) {
      const size_t start = line_end + 2;
      line_end = head.find("\r\n", start);
      const std::string line = head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t v = colon + 1;
      while (v < line.size() && line[v] == ' ') ++v;
      r.headers.emplace_back(name, line.substr(v));
    }
    if (r.status < 200 || r.status == 204 || r.status == 304) return r;
    if (r.has_header("content-length")) {
      const size_t n = std::stoul(r.header("content-length"));
      while (buf_.size() < n)
        if (!fill()) return std::nullopt;
      r.body = buf_.substr(0, n);
      buf_.erase(0, n);
    } else if (r.header("transfer-encoding") == "chunked") {
      while (true) {
        size_t eol;
        while ((eol = buf_.find("\r\n")) == std::string::npos)
          if (!fill()) return std::nullopt;
        const size_t size = std::stoul(buf_.substr(0, eol), nullptr, 16);
        while (buf_.size() < eol + 2 + size + 2)
          if (!fill()) return std::nullopt;
        r.body += buf_.substr(eol + 2, size);
        buf_.erase(0, eol + 2 + size + 2);
        if (size == 0) break;  // no trailers from our server
      }
    } else {
      while (fill()) {
      }
      if (!eof_) return std::nullopt;
      r.body = std::move(buf_);
      buf_.clear();
    }
    return r;
  }

  /// Reads until `needle` has arrived (true) or a timeout / EOF (false); returns what came.
  bool read_until(std::string_view needle, std::string* got = nullptr) {
    while (buf_.find(needle) == std::string::npos)
      if (!fill()) {
        if (got) *got = buf_;
        return false;
      }
    if (got) *got = buf_;
    return true;
  }

  /// True when the server closed the connection (EOF or reset) within the receive timeout;
  /// whatever arrived first is in buffered().
  bool wait_closed() {
    while (fill()) {
    }
    return eof_;
  }
  const std::string& buffered() const { return buf_; }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  bool fill() {
    char tmp[16384];
    while (true) {
      const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n > 0) {
        buf_.append(tmp, static_cast<size_t>(n));
        return true;
      }
      if (n < 0 && errno == EINTR) continue;
      eof_ = n == 0 || errno == ECONNRESET;
      return false;
    }
  }

  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string buf_;
};

/// @brief One request on a new connection (60 s limit): a JSON body gets its Content-Type and
/// Content-Length; a failed send or no response is a test failure and an empty reply.
inline HttpReply request(int port, const std::string& method, const std::string& path, const std::string& body = "",
                  const std::string& extra_headers = "") {
  TestConnection c(port, std::chrono::seconds(60));
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: x\r\n" + extra_headers;
  if (!body.empty() || method == "POST")
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  EXPECT_TRUE(c.send(req));
  std::optional<HttpReply> r = c.read_response();
  EXPECT_TRUE(r.has_value()) << method << " " << path;
  return r.value_or(HttpReply{});
}

}  // namespace th::test
