#include "http/response_exchange.h"

#include <cstdio>

#include "http/loop_mailbox.h"

namespace th::http {

ResponseExchange::ResponseExchange(std::shared_ptr<LoopMailbox> mailbox, uint64_t connection_id,
                                   std::string request_id, int version_minor, bool keep_alive)
    : mailbox_(std::move(mailbox)),
      connection_id_(connection_id),
      request_id_(std::move(request_id)),
      version_minor_(version_minor),
      keep_alive_(keep_alive) {}

bool ResponseExchange::schedule_locked() {
  if (scheduled_) return true;
  if (!mailbox_->post(shared_from_this())) {
    closed_ = true;  // the server is gone
    return false;
  }
  scheduled_ = true;
  return true;
}

bool ResponseExchange::append_head_locked(int status, const std::vector<HttpHeader>& headers, BodyFraming framing,
                                          size_t length) {
  // A server that started draining after this request came still answers
  // it, but says it will close.
  const bool keep_alive = keep_alive_ && !mailbox_->draining() && framing != BodyFraming::kUntilClose;
  close_after_ = !keep_alive;
  if (extra_headers_.empty()) {
    outbox_ += serialize_head(status, headers, framing, length, keep_alive, version_minor_, request_id_);
  } else {
    std::vector<HttpHeader> all = headers;
    all.insert(all.end(), extra_headers_.begin(), extra_headers_.end());
    outbox_ += serialize_head(status, all, framing, length, keep_alive, version_minor_, request_id_);
  }
  return true;
}

void ResponseExchange::append_data_locked(std::string_view bytes) {
  if (!chunked_) {
    outbox_.append(bytes);
    return;
  }
  char size_line[24];
  const int n = std::snprintf(size_line, sizeof size_line, "%zx\r\n", bytes.size());
  outbox_.append(size_line, static_cast<size_t>(n));
  outbox_.append(bytes);
  outbox_ += "\r\n";
}

bool ResponseExchange::send(HttpResponse response) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || phase_ != Phase::kNone) return false;
  const bool no_body = status_has_no_body(response.status);
  append_head_locked(response.status, response.headers, BodyFraming::kContentLength,
                     no_body ? 0 : response.body.size());
  if (!no_body) outbox_ += response.body;
  phase_ = Phase::kDone;
  return schedule_locked();
}

bool ResponseExchange::start_stream(int status, std::vector<HttpHeader> headers) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || phase_ != Phase::kNone) return false;
  // HTTP/1.0 has no chunked coding: the stream ends when the connection does.
  chunked_ = version_minor_ >= 1;
  append_head_locked(status, headers, chunked_ ? BodyFraming::kChunked : BodyFraming::kUntilClose, 0);
  phase_ = Phase::kStreaming;
  return schedule_locked();
}

bool ResponseExchange::write(std::string_view bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!writable_locked()) return false;
  if (bytes.empty()) return true;  // an empty chunk would end a chunked body
  append_data_locked(bytes);
  return schedule_locked();
}

bool ResponseExchange::send_event(std::string_view data) {
  // SSE (WHATWG HTML 9.2): one "data:" field per line of `data`, then a blank
  // line. CR, LF and CRLF all break lines; the client joins them with LF.
  std::string event;
  event.reserve(data.size() + 16);
  size_t start = 0;
  while (true) {
    const size_t brk = data.find_first_of("\r\n", start);
    event += "data: ";
    event.append(data.substr(start, brk == std::string_view::npos ? std::string_view::npos : brk - start));
    event += '\n';
    if (brk == std::string_view::npos) break;
    start = brk + (data[brk] == '\r' && brk + 1 < data.size() && data[brk + 1] == '\n' ? 2 : 1);
  }
  event += '\n';
  return write(event);
}

bool ResponseExchange::end() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!writable_locked()) return false;
  if (chunked_) outbox_ += "0\r\n\r\n";
  else close_after_ = true;
  phase_ = Phase::kDone;
  return schedule_locked();
}

bool ResponseExchange::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

void ResponseExchange::on_close(std::function<void()> callback) {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) {
    lock.unlock();
    if (callback) callback();
    return;
  }
  on_close_ = std::move(callback);
}

void ResponseExchange::abandon() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || phase_ == Phase::kDone) return;
  if (phase_ == Phase::kNone) {
    HttpResponse r = error_response(500, "the handler returned no response");
    append_head_locked(r.status, r.headers, BodyFraming::kContentLength, r.body.size());
    outbox_ += r.body;
  } else {
    close_after_ = true;  // no terminating chunk: the client must not take it as complete
  }
  phase_ = Phase::kDone;
  schedule_locked();
}

size_t ResponseExchange::buffered_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outbox_.size() + unsent_.load(std::memory_order_relaxed);
}

ResponseExchange::Output ResponseExchange::take_output() {
  std::lock_guard<std::mutex> lock(mu_);
  Output out;
  out.bytes.swap(outbox_);
  out.done = phase_ == Phase::kDone;
  out.close_after = close_after_;
  scheduled_ = false;
  return out;
}

void ResponseExchange::mark_closed() {
  std::function<void()> callback;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
    outbox_.clear();
    if (phase_ != Phase::kDone) callback = std::move(on_close_);
    on_close_ = nullptr;
  }
  if (callback) callback();
}

}  // namespace th::http
