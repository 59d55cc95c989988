#include "server/access_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>

#include <nlohmann/json.hpp>

#include "http/http_response.h"

namespace th::server {
namespace {

nlohmann::ordered_json string_or_null(const std::string& s) {
  return s.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s);
}

// Milliseconds to the microsecond: more digits would be noise in a log.
nlohmann::ordered_json ms_or_null(double ms) {
  if (!(ms >= 0) || !std::isfinite(ms)) return nullptr;
  return std::round(ms * 1000.0) / 1000.0;
}

}  // namespace

std::string rfc3339_utc_ms(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  auto ms = duration_cast<milliseconds>(t.time_since_epoch()).count();
  int64_t secs = ms / 1000, frac = ms % 1000;
  if (frac < 0) {  // before 1970: floor, not truncate
    frac += 1000;
    secs -= 1;
  }
  std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(frac));
  return buf;
}

AccessLog::AccessLog(std::FILE* out) : file_(out) {}
AccessLog::AccessLog(UniqueFd fd) : fd_(std::move(fd)) {}

Result<std::unique_ptr<AccessLog>> AccessLog::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return Status::errorf(path, ": cannot open the access log: ", std::strerror(errno));
  return std::unique_ptr<AccessLog>(new AccessLog(UniqueFd(fd)));
}

std::string AccessLog::format(const AccessRecord& r) {
  nlohmann::ordered_json j;
  j["time"] = rfc3339_utc_ms(r.time);
  j["request_id"] = string_or_null(r.request_id);
  j["method"] = string_or_null(r.method);
  j["path"] = string_or_null(r.path.substr(0, r.path.find('?')));
  j["status"] = r.status;
  j["tenant"] = string_or_null(r.tenant);
  j["prompt_tokens"] = r.prompt_tokens;
  j["completion_tokens"] = r.completion_tokens;
  j["cached_tokens"] = r.cached_tokens;
  j["queue_ms"] = ms_or_null(r.queue_ms);
  j["ttft_ms"] = ms_or_null(r.ttft_ms);
  j["e2e_ms"] = ms_or_null(r.e2e_ms);
  j["finish_reason"] = string_or_null(r.finish_reason);
  j["bytes_out"] = r.bytes_out;
  j["client"] = string_or_null(r.client);
  // Invalid UTF-8 (a path is bytes) becomes U+FFFD instead of throwing.
  return http::json_text(j) + '\n';
}

void AccessLog::write(const AccessRecord& record) {
  std::string line = format(record);
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_.valid()) {
    // O_APPEND: each write() lands whole at the end, even with other writers.
    size_t off = 0;
    while (off < line.size()) {
      ssize_t n = ::write(fd_.get(), line.data() + off, line.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ++write_errors_;
        return;
      }
      off += static_cast<size_t>(n);
    }
    return;
  }
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) ++write_errors_;
}

uint64_t AccessLog::write_errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return write_errors_;
}

}  // namespace th::server
