#include "engine/request_stream.h"

namespace th {

void RequestChannel::push(TokenEvent e) {
  {
    std::lock_guard<std::mutex> l(m_);
    if (closed_) return;
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
  if (listener_) listener_();
}

void RequestChannel::finish(TokenEvent e, RequestMetrics m) {
  {
    std::lock_guard<std::mutex> l(m_);
    if (closed_) return;
    events_.push_back(std::move(e));
    metrics_ = std::move(m);
    closed_ = true;
  }
  cv_.notify_all();
  if (listener_) listener_();
}

std::optional<TokenEvent> RequestChannel::next() {
  std::unique_lock<std::mutex> l(m_);
  cv_.wait(l, [&] { return !events_.empty() || taken_; });
  if (events_.empty()) return std::nullopt;
  TokenEvent e = std::move(events_.front());
  events_.pop_front();
  if (closed_ && events_.empty()) taken_ = true;
  return e;
}

std::optional<TokenEvent> RequestChannel::try_next() {
  std::lock_guard<std::mutex> l(m_);
  if (events_.empty()) return std::nullopt;
  TokenEvent e = std::move(events_.front());
  events_.pop_front();
  if (closed_ && events_.empty()) taken_ = true;
  return e;
}

bool RequestChannel::done() const {
  std::lock_guard<std::mutex> l(m_);
  return taken_;
}

void RequestChannel::cancel() {
  if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
  {
    std::lock_guard<std::mutex> l(m_);
    if (closed_) return;  // finished already: nothing for the engine to do
  }
  signal_->notify();
}

RequestMetrics RequestChannel::metrics() const {
  std::lock_guard<std::mutex> l(m_);
  return metrics_;
}

RequestStream& RequestStream::operator=(RequestStream&& o) noexcept {
  if (this != &o) {
    if (ch_) ch_->cancel();
    id_ = o.id_;
    ch_ = std::move(o.ch_);
  }
  return *this;
}

RequestStream::~RequestStream() {
  if (ch_) ch_->cancel();  // harmless once finished: the engine has forgotten the request
}

std::vector<TokenEvent> RequestStream::drain() {
  std::vector<TokenEvent> out;
  while (std::optional<TokenEvent> e = ch_->try_next()) out.push_back(std::move(*e));
  return out;
}

}  // namespace th
