// A request's results, from the engine thread to whoever submitted it: a
// channel of TokenEvents with its own lock, and the consumer's handle to it.
// Dropping the handle cancels the request; the engine frees everything the
// request held at its next step.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/request.h"

namespace th {

/// @brief Wakes the engine thread (a new request, a cancellation). Shared, so that a stream
/// outliving its engine can still signal harmlessly.
class EngineSignal {
 public:
  void notify() {
    {
      std::lock_guard<std::mutex> l(m_);
      pending_ = true;
    }
    cv_.notify_one();
  }
  /// @brief Waits until notified (or `ready()` holds, checked under the lock), consuming the notification.
  template <class Pred>
  void wait(Pred ready) {
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [&] { return pending_ || ready(); });
    pending_ = false;
  }
  /// @brief As wait(), but returns at `deadline` too; false when it was the deadline.
  template <class Pred>
  bool wait_until(std::chrono::steady_clock::time_point deadline, Pred ready) {
    std::unique_lock<std::mutex> l(m_);
    const bool woke = cv_.wait_until(l, deadline, [&] { return pending_ || ready(); });
    pending_ = false;
    return woke;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool pending_ = false;
};

/// @brief The state a request's producer (the engine thread) and consumer share.
class RequestChannel {
 public:
  /// @brief `listener`, when set, runs on the producer's thread after every push and finish
  /// (outside the channel's lock): it must only signal (wake a consumer), never block.
  explicit RequestChannel(std::shared_ptr<EngineSignal> signal, std::function<void()> listener = {})
      : signal_(std::move(signal)), listener_(std::move(listener)) {}

  // Producer side (engine thread).
  void push(TokenEvent e);
  /// @brief Pushes the final event and the request's metrics; later pushes are ignored.
  void finish(TokenEvent e, RequestMetrics m);
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  // Consumer side.
  std::optional<TokenEvent> next();      // blocks; nullopt once the final event has been taken
  std::optional<TokenEvent> try_next();  // never blocks
  bool done() const;                     // the final event has been taken
  void cancel();
  RequestMetrics metrics() const;

 private:
  std::shared_ptr<EngineSignal> signal_;
  std::function<void()> listener_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<TokenEvent> events_;
  bool closed_ = false;  // the final event has been pushed
  bool taken_ = false;   // ... and taken
  RequestMetrics metrics_;
  std::atomic<bool> cancelled_{false};
};

/// @brief The consumer's handle: move-only; destroying it cancels the request.
class RequestStream {
 public:
  RequestStream(uint64_t id, std::shared_ptr<RequestChannel> ch) : id_(id), ch_(std::move(ch)) {}
  RequestStream(RequestStream&&) noexcept = default;
  RequestStream& operator=(RequestStream&& o) noexcept;
  RequestStream(const RequestStream&) = delete;
  RequestStream& operator=(const RequestStream&) = delete;
  ~RequestStream();

  uint64_t id() const { return id_; }
  /// @brief The next event, waiting for it (the engine must be running, or stepped by another
  /// thread); nullopt after the final event.
  std::optional<TokenEvent> next() { return ch_->next(); }
  /// @brief The next event if one is ready.
  std::optional<TokenEvent> try_next() { return ch_->try_next(); }
  /// @brief Every event ready now.
  std::vector<TokenEvent> drain();
  bool done() const { return ch_->done(); }
  /// @brief Asks the engine to stop the request; its final event says Cancelled (unless it
  /// had already finished).
  void cancel() { ch_->cancel(); }
  RequestMetrics metrics() const { return ch_->metrics(); }

 private:
  uint64_t id_;
  std::shared_ptr<RequestChannel> ch_;
};

}  // namespace th
