#include "client/sse_reader.h"

namespace th::client {

Status SseReader::feed(std::string_view bytes, const OnEvent& on_event) {
  if (!bom_checked_) {
    // The BOM may itself arrive split; hold back until 3 bytes are seen.
    static constexpr std::string_view kBom = "\xEF\xBB\xBF";
    line_.append(bytes);
    if (line_.size() < kBom.size() && kBom.substr(0, line_.size()) == line_) return ok_status();
    bom_checked_ = true;
    std::string pending = std::move(line_);
    line_.clear();
    std::string_view rest = pending;
    if (rest.substr(0, kBom.size()) == kBom) rest.remove_prefix(kBom.size());
    return feed(rest, on_event);
  }
  size_t i = 0;
  while (i < bytes.size() && !stopped_) {
    if (after_cr_) {
      after_cr_ = false;
      if (bytes[i] == '\n') {
        ++i;
        continue;
      }
    }
    const size_t end = bytes.find_first_of("\r\n", i);
    if (end == std::string_view::npos) {
      line_.append(bytes.substr(i));
      if (line_.size() > max_event_bytes_) return Status::errorf("event stream: a line over ", max_event_bytes_, " bytes");
      break;
    }
    after_cr_ = bytes[end] == '\r';
    std::string_view line = bytes.substr(i, end - i);
    i = end + 1;
    if (!line_.empty()) {
      line_.append(line);
      if (line_.size() > max_event_bytes_) return Status::errorf("event stream: a line over ", max_event_bytes_, " bytes");
      std::string whole = std::move(line_);
      line_.clear();
      TH_RETURN_IF_ERROR(on_line(whole, on_event));
    } else {
      TH_RETURN_IF_ERROR(on_line(line, on_event));
    }
  }
  return ok_status();
}

Status SseReader::on_line(std::string_view line, const OnEvent& on_event) {
  if (line.empty()) {
    if (has_data_) {
      SseEvent event;
      event.type = type_.empty() ? "message" : type_;
      event.data = std::move(data_);
      event.id = last_id_;
      event.retry = retry_;
      if (!on_event(event)) stopped_ = true;
    }
    data_.clear();
    has_data_ = false;
    type_.clear();
    return ok_status();
  }
  if (line.front() == ':') return ok_status();
  std::string_view field = line, value;
  const size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (data_.size() + value.size() + 1 > max_event_bytes_)
      return Status::errorf("event stream: an event over ", max_event_bytes_, " bytes");
    if (has_data_) data_ += '\n';
    data_.append(value);
    has_data_ = true;
  } else if (field == "event") {
    type_ = std::string(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) last_id_ = std::string(value);
  } else if (field == "retry") {
    bool digits = !value.empty() && value.size() <= 15;
    for (char c : value) digits = digits && c >= '0' && c <= '9';
    if (digits) retry_ = std::stoll(std::string(value));
  }
  return ok_status();
}

}  // namespace th::client
