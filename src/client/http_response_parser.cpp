#include "client/http_response_parser.h"

#include <algorithm>

namespace th::client {

namespace {

bool is_tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// True when the comma-separated list `value` holds `token` (lower case), in any case.
bool list_has(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (to_lower_ascii(trim_ows(value.substr(0, comma))) == token) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

std::string to_lower_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::optional<std::string_view> Response::header(std::string_view name) const {
  const std::string lower = to_lower_ascii(name);
  for (const Header& h : headers)
    if (h.name == lower) return std::string_view(h.value);
  return std::nullopt;
}

void HttpResponseParser::reset(std::string_view method) {
  *this = HttpResponseParser(limits_);
  head_request_ = method == "HEAD";
}

Result<size_t> HttpResponseParser::feed(std::string_view data, std::string* body) {
  size_t i = 0;
  while (i < data.size() && phase_ != Phase::kDone) {
    switch (phase_) {
      case Phase::kBody:
      case Phase::kChunkData: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size() - i));
        body->append(data.substr(i, take));
        remaining_ -= take;
        i += take;
        if (remaining_ == 0) phase_ = phase_ == Phase::kBody ? Phase::kDone : Phase::kChunkDataEnd;
        break;
      }
      case Phase::kUntilClose:
        body->append(data.substr(i));
        i = data.size();
        break;
      default: {
        const size_t nl = data.find('\n', i);
        const size_t end = nl == std::string_view::npos ? data.size() : nl;
        line_.append(data.substr(i, end - i));
        const bool in_head = phase_ == Phase::kStatusLine || phase_ == Phase::kHeaders || phase_ == Phase::kTrailers;
        if (in_head) head_bytes_ += end - i + (nl == std::string_view::npos ? 0 : 1);
        if (in_head ? head_bytes_ > limits_.max_head_bytes : line_.size() > 1024)
          return Status::error(in_head ? "response head too large" : "chunk-size line too long");
        if (nl == std::string_view::npos) return data.size();
        i = nl + 1;
        std::string line = std::move(line_);
        line_.clear();
        if (!line.empty() && line.back() == '\r') line.pop_back();
        TH_RETURN_IF_ERROR(on_line(line));
      }
    }
  }
  return i;
}

Status HttpResponseParser::on_line(std::string_view line) {
  switch (phase_) {
    case Phase::kStatusLine: {
      // "HTTP/1.1 200 OK" (the reason phrase may be empty, even without its space).
      if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[7] < '0' || line[7] > '9' || line[8] != ' ' ||
          (line.size() > 12 && line[12] != ' '))
        return Status::error("malformed status line");
      int status = 0;
      for (char c : line.substr(9, 3)) {
        if (c < '0' || c > '9') return Status::error("malformed status line");
        status = status * 10 + (c - '0');
      }
      if (status < 100) return Status::error("malformed status line");
      status_ = status;
      version_minor_ = line[7] - '0';
      phase_ = Phase::kHeaders;
      return ok_status();
    }
    case Phase::kHeaders:
    case Phase::kTrailers: {
      if (line.empty()) {
        if (phase_ == Phase::kTrailers) {
          phase_ = Phase::kDone;
          return ok_status();
        }
        return on_headers_end();
      }
      if (line.front() == ' ' || line.front() == '\t') return Status::error("obsolete header line folding");
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos || colon == 0) return Status::error("malformed header line");
      const std::string_view name = line.substr(0, colon);
      if (!std::all_of(name.begin(), name.end(), is_tchar)) return Status::error("malformed header name");
      if (phase_ == Phase::kTrailers) {
        if (++trailer_count_ > limits_.max_headers) return Status::error("too many trailer fields");
        return ok_status();  // trailers are read and dropped
      }
      if (headers_.size() >= limits_.max_headers) return Status::error("too many header fields");
      headers_.push_back({to_lower_ascii(name), std::string(trim_ows(line.substr(colon + 1)))});
      return ok_status();
    }
    case Phase::kChunkSize: {
      uint64_t size = 0;
      size_t n = 0;
      for (; n < line.size(); ++n) {
        const char c = line[n];
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else break;
        if (n >= 15) return Status::error("chunk size too large");
        size = size * 16 + static_cast<uint64_t>(d);
      }
      const std::string_view rest = trim_ows(line.substr(n));
      if (n == 0 || (!rest.empty() && rest.front() != ';')) return Status::error("malformed chunk size");
      if (size == 0) {
        phase_ = Phase::kTrailers;
        head_bytes_ = 0;
      } else {
        remaining_ = size;
        phase_ = Phase::kChunkData;
      }
      return ok_status();
    }
    case Phase::kChunkDataEnd:
      if (!line.empty()) return Status::error("chunk not followed by a line end");
      phase_ = Phase::kChunkSize;
      return ok_status();
    default:
      return Status::error("response parser in a bad state");
  }
}

Status HttpResponseParser::on_headers_end() {
  if (status_ >= 100 && status_ < 200) {
    if (status_ == 101) return Status::error("unexpected 101 Switching Protocols");
    // An interim response (100 Continue, 103 Early Hints): the final one follows.
    headers_.clear();
    head_bytes_ = 0;
    phase_ = Phase::kStatusLine;
    return ok_status();
  }
  std::optional<std::string_view> te, cl;
  bool close = false, keep_alive = false;
  for (const Header& h : headers_) {
    if (h.name == "transfer-encoding") {
      if (te) return Status::error("repeated Transfer-Encoding");
      te = h.value;
    } else if (h.name == "content-length") {
      // A list of equal values ("5, 5") is one length (RFC 9110 8.6).
      std::string_view v = h.value;
      while (!v.empty()) {
        const size_t comma = v.find(',');
        const std::string_view one = trim_ows(v.substr(0, comma));
        if (one.empty() || one.size() > 18 || !std::all_of(one.begin(), one.end(), [](char c) { return c >= '0' && c <= '9'; }))
          return Status::error("invalid Content-Length");
        if (cl && *cl != one) return Status::error("conflicting Content-Lengths");
        cl = one;
        if (comma == std::string_view::npos) break;
        v.remove_prefix(comma + 1);
      }
    } else if (h.name == "connection") {
      close = close || list_has(h.value, "close");
      keep_alive = keep_alive || list_has(h.value, "keep-alive");
    }
  }
  keep_alive_ = version_minor_ >= 1 ? !close : keep_alive && !close;
  if (head_request_ || status_ == 204 || status_ == 304) {
    phase_ = Phase::kDone;
    return ok_status();
  }
  if (te) {
    if (cl) return Status::error("both Transfer-Encoding and Content-Length");
    // We send no TE or Accept-Encoding, so chunked alone is all a server may use.
    if (to_lower_ascii(trim_ows(*te)) != "chunked") return Status::errorf("unsupported Transfer-Encoding: ", *te);
    phase_ = Phase::kChunkSize;
    return ok_status();
  }
  if (cl) {
    remaining_ = std::stoull(std::string(*cl));
    phase_ = remaining_ == 0 ? Phase::kDone : Phase::kBody;
    return ok_status();
  }
  keep_alive_ = false;
  phase_ = Phase::kUntilClose;
  return ok_status();
}

Status HttpResponseParser::finish_at_eof() {
  if (phase_ == Phase::kUntilClose) phase_ = Phase::kDone;
  if (phase_ == Phase::kDone) return ok_status();
  return Status::error(phase_ == Phase::kStatusLine && head_bytes_ == 0 && line_.empty()
                           ? "connection closed before a response"
                           : "connection closed in the middle of a response");
}

}  // namespace th::client
