#include "http/http_request_parser.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace th::http {
namespace {

// The longest registered method (UPDATEREDIRECTREF) has 17 characters.
constexpr size_t kMaxMethodBytes = 32;
// 10^18 < 2^63: eighteen significant digits cannot overflow.
constexpr size_t kMaxLengthDigits = 18;
// Sixteen hex digits fill 64 bits; more is an overflow.
constexpr size_t kMaxChunkSizeDigits = 16;

bool is_tchar(unsigned char c) {
  if (c >= 'a' && c <= 'z') return true;
  if (c >= 'A' && c <= 'Z') return true;
  if (c >= '0' && c <= '9') return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_tchar(static_cast<unsigned char>(c))) return false;
  return true;
}

// field-value bytes: VCHAR, obs-text, SP, HTAB. Anything else (NUL, CR, LF,
// other controls, DEL) is rejected.
bool is_field_byte(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Calls f(element) for each non-empty, trimmed element of a comma list.
template <class F>
void for_each_list_element(std::string_view list, F&& f) {
  while (true) {
    size_t comma = list.find(',');
    std::string_view e = trim_ows(list.substr(0, comma));
    if (!e.empty()) f(e);
    if (comma == std::string_view::npos) return;
    list.remove_prefix(comma + 1);
  }
}

bool starts_with_ci(std::string_view s, std::string_view lower_prefix) {
  return s.size() >= lower_prefix.size() && iequals_lower(s.substr(0, lower_prefix.size()), lower_prefix);
}

}  // namespace

HttpRequestParser::HttpRequestParser(HttpLimits limits) : limits_(limits) {}

HttpRequestParser::State HttpRequestParser::state() const {
  if (phase_ == Phase::kDone) return State::kComplete;
  if (phase_ == Phase::kError) return State::kError;
  return State::kNeedMore;
}

bool HttpRequestParser::started() const { return phase_ != Phase::kRequestLine || !line_.empty(); }

bool HttpRequestParser::in_body() const {
  switch (phase_) {
    case Phase::kBody:
    case Phase::kChunkSize:
    case Phase::kChunkData:
    case Phase::kChunkDataEnd:
    case Phase::kTrailers:
      return true;
    default:
      return false;
  }
}

HttpRequest HttpRequestParser::take() {
  HttpRequest out = std::move(request_);
  reset();
  return out;
}

void HttpRequestParser::reset() {
  phase_ = Phase::kRequestLine;
  error_ = {};
  request_ = HttpRequest();
  line_.clear();
  head_bytes_ = trailer_bytes_ = trailer_count_ = 0;
  remaining_ = 0;
}

bool HttpRequestParser::fail(int status, const char* reason) {
  phase_ = Phase::kError;
  error_ = {status, reason};
  line_.clear();
  line_.shrink_to_fit();
  return false;
}

size_t HttpRequestParser::feed(std::string_view data) {
  size_t pos = 0;
  while (pos < data.size()) {
    if (phase_ == Phase::kDone || phase_ == Phase::kError) break;
    const char* start = data.data() + pos;
    const size_t avail = data.size() - pos;
    if (phase_ == Phase::kBody || phase_ == Phase::kChunkData) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, avail));
      request_.body.append(start, n);
      pos += n;
      remaining_ -= n;
      if (remaining_ == 0) phase_ = phase_ == Phase::kBody ? Phase::kDone : Phase::kChunkDataEnd;
      continue;
    }
    // A line phase: take bytes up to and including the next LF, within the
    // byte budget of this phase, so that nothing is buffered past a limit.
    const char* lf = static_cast<const char*>(std::memchr(start, '\n', avail));
    const size_t take = lf ? static_cast<size_t>(lf - start) + 1 : avail;
    switch (phase_) {
      case Phase::kRequestLine:
      case Phase::kHeaders:
        if (head_bytes_ + take > limits_.max_header_bytes) {
          if (phase_ == Phase::kRequestLine) fail(414, "request line too long");
          else fail(431, "request header fields too large");
          return pos;
        }
        head_bytes_ += take;
        break;
      case Phase::kChunkSize:
        if (line_.size() + take > limits_.max_chunk_line_bytes) {
          fail(400, "chunk size line too long");
          return pos;
        }
        break;
      case Phase::kChunkDataEnd:
        // Only CRLF (or LF) may follow chunk data.
        if (line_.size() + take > 2) {
          fail(400, "chunk data longer than its size");
          return pos;
        }
        break;
      case Phase::kTrailers:
        if (trailer_bytes_ + take > limits_.max_header_bytes) {
          fail(431, "trailer fields too large");
          return pos;
        }
        trailer_bytes_ += take;
        break;
      default:
        break;
    }
    pos += take;
    if (!lf) {
      line_.append(start, take);
      continue;
    }
    std::string_view line;
    if (line_.empty()) {
      line = std::string_view(start, take - 1);  // the whole line is here: no copy
    } else {
      line_.append(start, take - 1);
      line = line_;
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const bool ok = on_line(line);
    line_.clear();
    if (!ok) break;
  }
  return pos;
}

bool HttpRequestParser::on_line(std::string_view line) {
  switch (phase_) {
    case Phase::kRequestLine:
      if (line.empty()) return true;  // blank lines before a request are skipped
      return on_request_line(line);
    case Phase::kHeaders:
      if (line.empty()) return on_headers_end();
      return on_header_line(line, /*trailer=*/false);
    case Phase::kChunkSize:
      return on_chunk_size_line(line);
    case Phase::kChunkDataEnd:
      if (!line.empty()) return fail(400, "chunk data longer than its size");
      phase_ = Phase::kChunkSize;
      return true;
    case Phase::kTrailers:
      if (line.empty()) {
        phase_ = Phase::kDone;
        return true;
      }
      return on_header_line(line, /*trailer=*/true);
    default:
      return fail(400, "unexpected parser state");
  }
}

bool HttpRequestParser::on_request_line(std::string_view line) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return fail(400, "malformed request line");
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (method.size() > kMaxMethodBytes || !is_token(method)) return fail(400, "invalid method");
  if (target.empty()) return fail(400, "empty request target");
  for (char c : target) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return fail(400, "invalid character in request target");
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9') {
    return fail(400, "malformed HTTP version");
  }
  if (version[5] != '1') return fail(505, "HTTP version not supported");
  // HTTP/1.2..1.9 are read as 1.1, the highest minor we speak (RFC 9110 6.2).
  request_.version_minor = version[7] == '0' ? 0 : 1;

  std::string_view path = target, query;
  if (target.front() == '/') {
    // origin-form
  } else if (target == "*") {
    if (method != "OPTIONS") return fail(400, "'*' target is only for OPTIONS");
  } else {
    // absolute-form (RFC 9112 3.2.2: a server MUST accept it)
    size_t scheme_end = 0;
    if (starts_with_ci(target, "http://")) scheme_end = 7;
    else if (starts_with_ci(target, "https://")) scheme_end = 8;
    else return fail(400, "invalid request target");
    const std::string_view rest = target.substr(scheme_end);
    const size_t path_start = rest.find_first_of("/?");
    if (path_start == 0) return fail(400, "empty authority in request target");
    path = path_start == std::string_view::npos ? std::string_view() : rest.substr(path_start);
  }
  if (const size_t q = path.find('?'); q != std::string_view::npos) {
    query = path.substr(q + 1);
    path = path.substr(0, q);
  }
  request_.method.assign(method);
  request_.target.assign(target);
  request_.path = path.empty() ? std::string("/") : std::string(path);
  if (target == "*") request_.path = "*";
  request_.query.assign(query);
  phase_ = Phase::kHeaders;
  return true;
}

bool HttpRequestParser::on_header_line(std::string_view line, bool trailer) {
  if (line.front() == ' ' || line.front() == '\t') return fail(400, "obsolete header line folding");
  if (trailer) {
    if (++trailer_count_ > limits_.max_headers) return fail(431, "too many trailer fields");
  } else if (request_.headers.size() >= limits_.max_headers) {
    return fail(431, "too many header fields");
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return fail(400, "header line without a colon");
  const std::string_view name = line.substr(0, colon);
  if (!is_token(name)) return fail(400, "invalid header name");
  const std::string_view value = trim_ows(line.substr(colon + 1));
  for (char c : value)
    if (!is_field_byte(static_cast<unsigned char>(c))) return fail(400, "invalid character in header value");
  // Trailers are checked and dropped: nothing above the transport reads them.
  if (!trailer) request_.headers.push_back({to_lower(name), std::string(value)});
  return true;
}

bool HttpRequestParser::on_headers_end() {
  HttpRequest& r = request_;
  int hosts = 0;
  bool has_length = false, has_te = false, conn_close = false, conn_keep_alive = false;
  bool expect_continue = false;
  uint64_t length = 0;
  std::string last_coding;
  int chunked_count = 0, coding_count = 0;
  for (const HttpHeader& h : r.headers) {
    if (h.name == "host") {
      ++hosts;
    } else if (h.name == "content-length") {
      bool bad = false;
      int values = 0;
      for_each_list_element(h.value, [&](std::string_view v) {
        ++values;
        size_t i = 0;
        while (i + 1 < v.size() && v[i] == '0') ++i;  // leading zeros are not significant
        if (v.size() - i > kMaxLengthDigits) {
          bad = true;
          return;
        }
        uint64_t n = 0;
        for (; i < v.size(); ++i) {
          if (v[i] < '0' || v[i] > '9') {
            bad = true;
            return;
          }
          n = n * 10 + static_cast<uint64_t>(v[i] - '0');
        }
        if (has_length && n != length) bad = true;
        has_length = true;
        length = n;
      });
      if (bad || values == 0) return fail(400, "invalid Content-Length");
    } else if (h.name == "transfer-encoding") {
      has_te = true;
      for_each_list_element(h.value, [&](std::string_view v) {
        last_coding = to_lower(v);
        ++coding_count;
        if (last_coding == "chunked") ++chunked_count;
      });
    } else if (h.name == "connection") {
      for_each_list_element(h.value, [&](std::string_view v) {
        if (iequals_lower(v, "close")) conn_close = true;
        if (iequals_lower(v, "keep-alive")) conn_keep_alive = true;
      });
    } else if (h.name == "expect" && r.version_minor == 1) {
      // HTTP/1.0 requests' Expect is ignored (RFC 9110 10.1.1).
      bool other = false;
      for_each_list_element(h.value, [&](std::string_view v) {
        if (iequals_lower(v, "100-continue")) expect_continue = true;
        else other = true;
      });
      if (other) return fail(417, "unsupported expectation");
    }
  }
  if (r.version_minor == 1 && hosts != 1) return fail(400, "missing or repeated Host header");
  r.keep_alive = r.version_minor == 1 ? !conn_close : conn_keep_alive && !conn_close;

  if (has_te) {
    if (r.version_minor == 0) return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
    if (has_length) return fail(400, "both Content-Length and Transfer-Encoding");
    if (last_coding != "chunked" || chunked_count != 1) return fail(400, "chunked is not the final transfer coding");
    if (coding_count != 1) return fail(501, "unsupported transfer coding");
    r.expects_continue = expect_continue;
    phase_ = Phase::kChunkSize;
    return true;
  }
  if (has_length && length > limits_.max_body_bytes) return fail(413, "request body too large");
  if (has_length && length > 0) {
    r.expects_continue = expect_continue;
    r.body.reserve(static_cast<size_t>(length));
    remaining_ = length;
    phase_ = Phase::kBody;
    return true;
  }
  phase_ = Phase::kDone;
  return true;
}

bool HttpRequestParser::on_chunk_size_line(std::string_view line) {
  uint64_t size = 0;
  size_t i = 0;
  for (; i < line.size(); ++i) {
    const int d = hex_value(line[i]);
    if (d < 0) break;
    if (i == kMaxChunkSizeDigits) return fail(400, "chunk size overflow");
    size = size * 16 + static_cast<uint64_t>(d);
  }
  if (i == 0) return fail(400, "invalid chunk size");
  std::string_view rest = line.substr(i);
  if (!rest.empty()) {
    // chunk-ext: BWS ";" ..., read for validity and ignored.
    rest = trim_ows(rest);
    if (rest.empty() || rest.front() != ';') return fail(400, "invalid chunk size");
    for (char c : rest)
      if (!is_field_byte(static_cast<unsigned char>(c))) return fail(400, "invalid chunk extension");
  }
  if (size == 0) {
    phase_ = Phase::kTrailers;
    return true;
  }
  if (size > limits_.max_body_bytes - request_.body.size()) return fail(413, "request body too large");
  remaining_ = size;
  phase_ = Phase::kChunkData;
  return true;
}

}  // namespace th::http
