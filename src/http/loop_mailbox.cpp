#include "http/loop_mailbox.h"

#include <sys/eventfd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace th::http {

Result<std::shared_ptr<LoopMailbox>> LoopMailbox::create() {
  UniqueFd efd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!efd) return Status::errorf("eventfd: ", std::strerror(errno));
  return std::shared_ptr<LoopMailbox>(new LoopMailbox(std::move(efd)));
}

void LoopMailbox::wake_locked() {
  // Only the first post into an empty mailbox wakes the loop: later ones find
  // it awake or about to take them. Posts from the loop itself need no wake.
  if (exchanges_.size() + tasks_.size() != 1) return;
  if (loop_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id()) return;
  const uint64_t one = 1;
  // A full counter (2^64 - 2 posts unread) cannot happen; EAGAIN would still mean "readable".
  [[maybe_unused]] ssize_t n = ::write(efd_.get(), &one, sizeof one);
}

bool LoopMailbox::post(std::shared_ptr<ResponseExchange> exchange) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return false;
  exchanges_.push_back(std::move(exchange));
  wake_locked();
  return true;
}

bool LoopMailbox::post_task(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return false;
  tasks_.push_back(std::move(task));
  wake_locked();
  return true;
}

bool LoopMailbox::take(std::vector<std::shared_ptr<ResponseExchange>>& exchanges,
                       std::vector<std::function<void()>>& tasks) {
  exchanges.clear();
  tasks.clear();
  std::lock_guard<std::mutex> lock(mu_);
  exchanges.swap(exchanges_);
  tasks.swap(tasks_);
  return !exchanges.empty() || !tasks.empty();
}

void LoopMailbox::drain_wakeups() {
  uint64_t n;
  [[maybe_unused]] ssize_t r = ::read(efd_.get(), &n, sizeof n);
}

void LoopMailbox::close() {
  std::vector<std::shared_ptr<ResponseExchange>> dropped;
  std::vector<std::function<void()>> dropped_tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    dropped.swap(exchanges_);
    dropped_tasks.swap(tasks_);
  }
  // Destroyed outside the lock: an exchange's last reference may be here.
}

}  // namespace th::http
