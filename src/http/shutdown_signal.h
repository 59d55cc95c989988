// SIGTERM and SIGINT as something to wait for rather than an interruption:
// install() blocks both in the calling thread and reads them from a
// signalfd. Install it in main() before any thread starts (threads inherit
// the mask), then:
//
//   auto sig = ShutdownSignal::install();
//   server.start();
//   sig->wait();                          // SIGTERM or Ctrl-C
//   server.shutdown(std::chrono::seconds(30));
//   return 0;
#pragma once

#include <signal.h>

#include <chrono>

#include "base/status.h"
#include "base/unique_fd.h"

namespace th::http {

class ShutdownSignal {
 public:
  static Result<ShutdownSignal> install();

  ShutdownSignal(ShutdownSignal&& o) noexcept;
  ShutdownSignal& operator=(ShutdownSignal&&) = delete;
  ShutdownSignal(const ShutdownSignal&) = delete;
  ShutdownSignal& operator=(const ShutdownSignal&) = delete;
  /// @brief Restores the signal mask install() found.
  ~ShutdownSignal();

  /// @brief Waits for SIGTERM or SIGINT; returns its number, or 0 when
  /// `timeout` passed first (a negative timeout waits for ever).
  int wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(-1));
  /// @brief The signalfd, readable when a signal is pending (for a poll loop).
  int fd() const { return fd_.get(); }

 private:
  ShutdownSignal(UniqueFd fd, sigset_t old_mask) : fd_(std::move(fd)), old_mask_(old_mask) {}
  UniqueFd fd_;
  sigset_t old_mask_;
  bool restore_ = true;
};

}  // namespace th::http
