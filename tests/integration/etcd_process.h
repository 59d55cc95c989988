// A real `etcd` child process for integration tests: one member on
// 127.0.0.1 with ephemeral client and peer ports (picked by binding port 0),
// a data directory of its own under the test temp dir, waited for until its
// JSON gateway answers a range. It can be killed (SIGKILL, as a crash) and
// started again on the same ports and data, and is killed and its data
// removed at the end.
//
//   if (!EtcdProcess::available()) GTEST_SKIP() << "no " << EtcdProcess::binary();
//   EtcdProcess etcd;
//   ASSERT_TRUE(etcd.ok()) << etcd.log();
//   ... etcd.endpoint() ...   // "http://127.0.0.1:PORT"
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/http_client.h"
#include "test_util.h"

extern char** environ;

namespace th::test {

class EtcdProcess {
 public:
  /// @brief The etcd binary ($TOKENHIVE_ETCD, else Debian's etcd-server's /usr/bin/etcd).
  static std::string binary() {
    const char* env = std::getenv("TOKENHIVE_ETCD");
    return env && *env ? env : "/usr/bin/etcd";
  }
  static bool available() { return ::access(binary().c_str(), X_OK) == 0; }

  /// @brief A free TCP port of 127.0.0.1 (bound to port 0, then released).
  static int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
    ::close(fd);
    return port;
  }

  /// @brief Starts etcd and waits up to `timeout_s` for it to answer; ok() says whether it did.
  explicit EtcdProcess(double timeout_s = 15) {
    static int counter = 0;
    const std::string base = temp_path("etcd_" + std::to_string(counter++));
    data_dir_ = base + ".data";
    log_path_ = base + ".log";
    std::error_code ec;
    std::filesystem::remove_all(data_dir_, ec);
    // Two free ports, distinct (a port just released could come back at once);
    // when another process takes one before etcd binds it, etcd exits: new ports.
    for (int tries = 0; tries < 3 && !ready_; ++tries) {
      client_port_ = free_port();
      do peer_port_ = free_port();
      while (peer_port_ == client_port_ && peer_port_ != 0);
      start(timeout_s);
      if (pid_ > 0) break;  // running (ready, or slow: not a port clash)
      std::filesystem::remove_all(data_dir_, ec);
    }
  }
  ~EtcdProcess() {
    kill();
    std::error_code ec;
    std::filesystem::remove_all(data_dir_, ec);
    ::unlink(log_path_.c_str());
  }
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  bool ok() const { return ready_; }
  int port() const { return client_port_; }
  pid_t pid() const { return pid_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(client_port_); }
  const std::string& data_dir() const { return data_dir_; }
  std::string log() const {
    std::ifstream in(log_path_, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  /// @brief SIGKILL, as a crash: nothing is flushed or closed cleanly.
  void kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
    ready_ = false;
  }

  /// @brief Starts it again on the same ports and data dir (after kill()); true once it answers.
  bool restart(double timeout_s = 15) {
    kill();
    start(timeout_s);
    return ready_;
  }

 private:
  void start(double timeout_s) {
    if (client_port_ == 0 || peer_port_ == 0) return;
    const std::string client_url = "http://127.0.0.1:" + std::to_string(client_port_);
    const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer_port_);
    std::vector<std::string> argv = {binary(),
                                     "--name", "default",
                                     "--data-dir", data_dir_,
                                     "--listen-client-urls", client_url,
                                     "--advertise-client-urls", client_url,
                                     "--listen-peer-urls", peer_url,
                                     "--initial-advertise-peer-urls", peer_url,
                                     "--initial-cluster", "default=" + peer_url,
                                     "--logger", "zap",
                                     "--log-level", "warn"};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<char*> cargs;
    for (std::string& a : argv) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    if (posix_spawn(&pid_, cargs[0], &fa, nullptr, cargs.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    if (pid_ < 0) return;

    client::HttpClientOptions options;
    options.request_timeout = std::chrono::milliseconds(500);
    options.connect_timeout = std::chrono::milliseconds(200);
    options.retry.max_attempts = 1;
    Result<std::unique_ptr<client::HttpClient>> http = client::HttpClient::create(client_url, options);
    if (!http.ok()) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      // A range answers only once the member has a leader and serves reads
      // (/health can say true a moment before the gateway serves).
      Result<client::Response> r = (*http)->request("POST", "/v3/kv/range", R"({"key":"AA=="})");
      if (r.ok() && r->status == 200) {
        ready_ = true;
        return;
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;  // it exited (a port taken, a bad flag): log() says why
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::string data_dir_, log_path_;
  int client_port_ = 0, peer_port_ = 0;
  pid_t pid_ = -1;
  bool ready_ = false;
};

}  // namespace th::test
