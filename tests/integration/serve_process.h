// A real `tokenhive serve` child process for integration tests: started on an
// ephemeral port of 127.0.0.1, waited for until it says it is ready, stopped
// with SIGTERM (or killed at the end of the test if it is still there).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

extern char** environ;

namespace th::test {

class ServeProcess {
 public:
  /// @brief Starts `tokenhive serve --port 0 ARGS...` and waits (up to `timeout_s`) until it
  /// is ready. ok() tells whether it got there; log() has its stderr.
  explicit ServeProcess(std::vector<std::string> args, double timeout_s = 60)
      : ServeProcess("serve", std::move(args), timeout_s) {}
  /// @brief The same for another serving verb (`tokenhive router --port 0 ARGS...`), ready
  /// when it prints "tokenhive VERB: ready".
  ServeProcess(const std::string& verb, std::vector<std::string> args, double timeout_s)
      : ServeProcess({}, verb, std::move(args), timeout_s) {}
  /// @brief The same started through a launcher (`mpirun -np 2 ...`) that runs the binary.
  ServeProcess(std::vector<std::string> launcher, const std::string& verb, std::vector<std::string> args,
               double timeout_s) {
    static int counter = 0;
    log_path_ = temp_path(verb + "_" + std::to_string(counter++) + ".log");
    std::vector<std::string> argv = std::move(launcher);
    argv.insert(argv.end(), {binary_path(), verb, "--port", "0"});
    // No warm-up unless a test asks for it: it would add a second or more to each of the
    // suite's hundred server starts under the sanitizers (ServeConventions tests it).
    if (verb == "serve" && std::find(args.begin(), args.end(), "--warmup") == args.end())
      argv.insert(argv.end(), {"--warmup", "0"});
    argv.insert(argv.end(), args.begin(), args.end());
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<char*> cargs;
    for (std::string& a : argv) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    if (posix_spawn(&pid_, cargs[0], &fa, nullptr, cargs.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    if (pid_ < 0) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    static const std::regex kListening("listening on http://[^:]+:([0-9]+)");
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string text = log();
      std::smatch m;
      if (port_ == 0 && std::regex_search(text, m, kListening)) port_ = std::stoi(m[1]);
      if (text.find("tokenhive " + verb + ": ready") != std::string::npos) {
        ready_ = true;
        return;
      }
      if (exited()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~ServeProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::unlink(log_path_.c_str());
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  bool ok() const { return ready_ && port_ > 0; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const {
    std::ifstream in(log_path_, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  /// @brief Sends `sig` and waits up to `timeout_s` for the exit; the exit code, or -1 when
  /// it did not exit in time (then it is killed) or died of a signal.
  int stop(int sig = SIGTERM, double timeout_s = 30) {
    if (pid_ <= 0 || reaped_) return exit_code_;
    ::kill(pid_, sig);
    return wait(timeout_s);
  }
  /// @brief Waits up to `timeout_s` for the exit (then kills it); the exit code or -1.
  int wait(double timeout_s) {
    if (pid_ <= 0 || reaped_) return exit_code_;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      if (exited()) return exit_code_;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    reaped_ = true;
    return -1;
  }

 private:
  bool exited() {
    if (reaped_) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
    reaped_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return true;
  }

  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
  bool ready_ = false;
  bool reaped_ = false;
  int exit_code_ = -1;
};

}  // namespace th::test
