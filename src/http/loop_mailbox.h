// The way into an event loop from other threads: response output that is
// ready (an exchange to look at) and control tasks, woken by an eventfd.
// Writers keep it alive through their exchange, so a writer that outlives
// the server posts into a closed mailbox and is told so, never into freed
// memory.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace th::http {

class ResponseExchange;

class LoopMailbox {
 public:
  static Result<std::shared_ptr<LoopMailbox>> create();

  /// @brief The eventfd that becomes readable when something is posted.
  int fd() const { return efd_.get(); }

  /// @brief From any thread: the exchange has output or changed state. False
  /// once the mailbox is closed.
  bool post(std::shared_ptr<ResponseExchange> exchange);
  /// @brief From any thread: runs `task` on the loop thread. False once closed.
  bool post_task(std::function<void()> task);

  /// @brief Loop thread: moves out everything posted so far; false when there was nothing.
  bool take(std::vector<std::shared_ptr<ResponseExchange>>& exchanges, std::vector<std::function<void()>>& tasks);
  /// @brief Loop thread: resets the eventfd's counter.
  void drain_wakeups();
  /// @brief Later posts fail; what was posted and not taken is dropped.
  void close();

  /// @brief The loop's thread: posts from it need no wakeup, the loop takes
  /// its mail before it waits again.
  void set_loop_thread(std::thread::id id) { loop_thread_ = id; }
  /// @brief Set while the server shuts down: responses then say Connection: close.
  bool draining() const { return draining_.load(std::memory_order_relaxed); }
  void set_draining() { draining_.store(true, std::memory_order_relaxed); }

 private:
  explicit LoopMailbox(UniqueFd efd) : efd_(std::move(efd)) {}
  void wake_locked();

  std::mutex mu_;
  bool closed_ = false;
  std::vector<std::shared_ptr<ResponseExchange>> exchanges_;
  std::vector<std::function<void()>> tasks_;
  UniqueFd efd_;
  std::atomic<std::thread::id> loop_thread_{};
  std::atomic<bool> draining_{false};
};

}  // namespace th::http
