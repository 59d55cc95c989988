// Server-sent events from a body that arrives in pieces, per the WHATWG
// event-stream rules (HTML, "Interpreting an event stream"):
// - lines end in CRLF, LF or CR (a CRLF split across pieces is one end);
// - "field: value" or "field:value" (one space after the colon is dropped),
//   a line without a colon is a field with an empty value, a line that
//   starts with ':' is a comment;
// - `data` lines are joined with '\n'; `event` sets the type, `id` the last
//   event id (ignored when it holds NUL), `retry` the stream's reconnection
//   time (digits only); both carry over to later events; other fields are
//   ignored;
// - a blank line dispatches the event, unless no data came (then only the
//   type is reset); a UTF-8 BOM at the start is skipped;
// - an event not ended by a blank line when the body ends is dropped.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace th::client {

struct SseEvent {
  std::string type = "message";  // the `event` field, "message" when absent
  std::string data;              // the `data` lines joined with '\n'
  std::string id;                // the last event id seen on the stream so far
  std::optional<int64_t> retry;  // the stream's reconnection time (the last `retry` field so far), in ms
};

class SseReader {
 public:
  /// @brief on_event gets each complete event; it returns false to stop reading.
  using OnEvent = std::function<bool(const SseEvent&)>;

  // A line or an event's data over this is an error: a server that never
  // sends a line end must not grow the client without bound.
  explicit SseReader(size_t max_event_bytes = 16u << 20) : max_event_bytes_(max_event_bytes) {}

  /// @brief Reads `bytes`, calling on_event for each event they complete.
  /// An error when a line or an event grows past the limit. After on_event
  /// returned false, stopped() is true and the rest is ignored.
  Status feed(std::string_view bytes, const OnEvent& on_event);
  bool stopped() const { return stopped_; }
  /// @brief The last event id (the stream's, for a reconnection's Last-Event-ID).
  const std::string& last_event_id() const { return last_id_; }

 private:
  Status on_line(std::string_view line, const OnEvent& on_event);

  size_t max_event_bytes_;
  std::string line_;
  bool after_cr_ = false;    // the last byte was CR: an LF right after it ends nothing
  bool bom_checked_ = false;
  bool stopped_ = false;
  std::string data_;
  bool has_data_ = false;
  std::string type_;
  std::string last_id_;
  std::optional<int64_t> retry_;
};

}  // namespace th::client
