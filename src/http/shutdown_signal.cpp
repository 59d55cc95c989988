#include "http/shutdown_signal.h"

#include <poll.h>
#include <pthread.h>
#include <sys/signalfd.h>

#include <cerrno>
#include <cstring>

namespace th::http {

Result<ShutdownSignal> ShutdownSignal::install() {
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  if (int rc = ::pthread_sigmask(SIG_BLOCK, &set, &old); rc != 0)
    return Status::errorf("pthread_sigmask: ", std::strerror(rc));
  UniqueFd fd(::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd) {
    const int err = errno;
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return Status::errorf("signalfd: ", std::strerror(err));
  }
  return ShutdownSignal(std::move(fd), old);
}

ShutdownSignal::ShutdownSignal(ShutdownSignal&& o) noexcept
    : fd_(std::move(o.fd_)), old_mask_(o.old_mask_), restore_(o.restore_) {
  o.restore_ = false;
}

ShutdownSignal::~ShutdownSignal() {
  if (restore_) ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

int ShutdownSignal::wait(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (true) {
    signalfd_siginfo info{};
    const ssize_t n = ::read(fd_.get(), &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) return static_cast<int>(info.ssi_signo);
    if (n < 0 && errno != EAGAIN && errno != EINTR) return 0;
    int wait_ms = -1;
    if (timeout.count() >= 0) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return 0;
      wait_ms = static_cast<int>(left.count());
    }
    pollfd p{fd_.get(), POLLIN, 0};
    ::poll(&p, 1, wait_ms);
  }
}

}  // namespace th::http
