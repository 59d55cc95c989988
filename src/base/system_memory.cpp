#include "base/system_memory.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace th {

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The process's cgroup v2 path ("0::/path" in /proc/self/cgroup), or "" when there is none.
std::string own_cgroup() {
  std::istringstream lines(read_all("/proc/self/cgroup"));
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return "";
}

// A cgroup file holding one number ("max" or unreadable: none).
bool read_number(const std::string& path, int64_t* out) {
  const std::string text = read_all(path);
  if (text.empty() || text.rfind("max", 0) == 0) return false;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || v < 0) return false;
  *out = v;
  return true;
}

}  // namespace

Result<int64_t> parse_mem_available(const std::string& meminfo) {
  std::istringstream lines(meminfo);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    char* end = nullptr;
    const char* start = line.c_str() + 13;
    const long long kb = std::strtoll(start, &end, 10);
    if (end == start || kb < 0 || kb > (int64_t{1} << 50)) return Status::errorf("/proc/meminfo: bad MemAvailable line '", line, "'");
    return static_cast<int64_t>(kb) * 1024;
  }
  return Status::error("/proc/meminfo: no MemAvailable line");
}

Result<int64_t> available_memory_bytes() {
  TH_ASSIGN_OR_RETURN(int64_t avail, parse_mem_available(read_all("/proc/meminfo")));
  const std::string cg = own_cgroup();
  int64_t max = 0, current = 0;
  if (!cg.empty() && read_number("/sys/fs/cgroup" + cg + "/memory.max", &max) &&
      read_number("/sys/fs/cgroup" + cg + "/memory.current", &current))
    avail = std::min(avail, std::max<int64_t>(0, max - current));
  return avail;
}

}  // namespace th
