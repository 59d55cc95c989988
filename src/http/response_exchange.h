// The state one response shares between the threads that produce it (through
// ResponseWriter handles) and the event loop that writes it to the socket.
// Producers serialize under the exchange's mutex into an outbox and post the
// exchange to the loop's mailbox once per batch; the loop takes the outbox,
// writes it, and tells the exchange when the client is gone.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_response.h"

namespace th::http {

class LoopMailbox;

class ResponseExchange : public std::enable_shared_from_this<ResponseExchange> {
 public:
  ResponseExchange(std::shared_ptr<LoopMailbox> mailbox, uint64_t connection_id, std::string request_id,
                   int version_minor, bool keep_alive);

  // Producer side, any thread. Each returns false when the call had no
  // effect: the client is gone, the response was already sent or ended, or
  // (for write/send_event) no stream was started.
  bool send(HttpResponse response);
  bool start_stream(int status, std::vector<HttpHeader> headers);
  bool write(std::string_view bytes);
  bool send_event(std::string_view data);
  bool end();
  /// @brief True once the connection closed before the response was complete.
  bool closed() const;
  /// @brief `callback` runs once, on the loop thread, when the connection
  /// closes before the response is complete; at once (on this thread) when
  /// that already happened. It must not block.
  void on_close(std::function<void()> callback);
  /// @brief The last ResponseWriter is gone: a response never sent becomes a
  /// 500; a stream never ended is cut (the connection closes, so the client
  /// sees it truncated, not complete).
  void abandon();
  /// @brief Bytes produced and not yet written to the socket.
  size_t buffered_bytes() const;
  const std::string& request_id() const { return request_id_; }

  // Loop side.
  struct Output {
    std::string bytes;
    bool done = false;         // the response's last byte is in `bytes` (or was earlier)
    bool close_after = false;  // close the connection once it is written
  };
  Output take_output();
  /// @brief The connection is gone: later calls fail; fires on_close unless the response was complete.
  void mark_closed();
  void set_unsent(size_t n) { unsent_.store(n, std::memory_order_relaxed); }
  uint64_t connection_id() const { return connection_id_; }
  /// @brief Headers every response head of this exchange carries besides its own (CORS);
  /// set on the loop before the handler runs.
  void add_headers(std::vector<HttpHeader> headers) { extra_headers_ = std::move(headers); }

 private:
  enum class Phase { kNone, kStreaming, kDone };
  bool writable_locked() const { return !closed_ && phase_ == Phase::kStreaming; }
  bool append_head_locked(int status, const std::vector<HttpHeader>& headers, BodyFraming framing, size_t length);
  void append_data_locked(std::string_view bytes);
  bool schedule_locked();

  const std::shared_ptr<LoopMailbox> mailbox_;
  const uint64_t connection_id_;
  const std::string request_id_;
  const int version_minor_;
  const bool keep_alive_;

  mutable std::mutex mu_;
  Phase phase_ = Phase::kNone;
  bool chunked_ = false;
  bool closed_ = false;
  bool scheduled_ = false;
  bool close_after_ = false;
  std::string outbox_;
  std::vector<HttpHeader> extra_headers_;
  std::function<void()> on_close_;
  std::atomic<size_t> unsent_{0};
};

}  // namespace th::http
