#include "http/response_writer.h"

#include "http/response_exchange.h"

namespace th::http {

// Shared by the copies of one writer; its end is the end of the last copy.
struct ResponseWriter::Handle {
  explicit Handle(std::shared_ptr<ResponseExchange> e) : exchange(std::move(e)) {}
  ~Handle() { exchange->abandon(); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  const std::shared_ptr<ResponseExchange> exchange;
};

ResponseWriter::ResponseWriter(std::shared_ptr<ResponseExchange> exchange)
    : handle_(exchange ? std::make_shared<Handle>(std::move(exchange)) : nullptr) {}

bool ResponseWriter::send(HttpResponse response) const {
  return handle_ && handle_->exchange->send(std::move(response));
}

bool ResponseWriter::start_stream(int status, std::vector<HttpHeader> headers) const {
  return handle_ && handle_->exchange->start_stream(status, std::move(headers));
}

bool ResponseWriter::start_sse(std::vector<HttpHeader> headers) const {
  headers.push_back({"Content-Type", "text/event-stream"});
  headers.push_back({"Cache-Control", "no-cache"});
  // Tells an nginx in front not to buffer the stream.
  headers.push_back({"X-Accel-Buffering", "no"});
  return start_stream(200, std::move(headers));
}

bool ResponseWriter::write(std::string_view bytes) const { return handle_ && handle_->exchange->write(bytes); }

bool ResponseWriter::send_event(std::string_view data) const {
  return handle_ && handle_->exchange->send_event(data);
}

bool ResponseWriter::end() const { return handle_ && handle_->exchange->end(); }

bool ResponseWriter::closed() const { return !handle_ || handle_->exchange->closed(); }

void ResponseWriter::on_close(std::function<void()> callback) const {
  if (handle_) handle_->exchange->on_close(std::move(callback));
  else if (callback) callback();
}

size_t ResponseWriter::buffered_bytes() const { return handle_ ? handle_->exchange->buffered_bytes() : 0; }

const std::string& ResponseWriter::request_id() const {
  static const std::string kNone;
  return handle_ ? handle_->exchange->request_id() : kNone;
}

size_t sse_event_bytes(std::string_view data) {
  size_t lines = 1, payload = data.size();
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] != '\r' && data[i] != '\n') continue;
    ++lines;
    --payload;
    if (data[i] == '\r' && i + 1 < data.size() && data[i + 1] == '\n') {
      ++i;
      --payload;
    }
  }
  return payload + lines * 7 + 1;
}

}  // namespace th::http
