#include "server/stop_strings.h"

#include <algorithm>

namespace th::server {

StopStringFilter::StopStringFilter(std::vector<std::string> stops, bool keep_stop) : keep_stop_(keep_stop) {
  for (std::string& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopStringFilter::push(std::string_view text) {
  if (stopped_) return {};
  held_.append(text);
  // Everything before held_ was released because no stop string could start there, so a
  // stop string, if any, starts inside held_: the earliest one wins.
  size_t first = std::string::npos, end = 0;
  for (const std::string& s : stops_) {
    const size_t at = held_.find(s);
    if (at == std::string::npos) continue;
    // The earliest wins; of two starting there, the longer (it completed in this push too).
    if (at < first || (at == first && at + s.size() > end)) end = at + s.size();
    first = std::min(first, at);
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, keep_stop_ ? end : first);
    held_.clear();
    return out;
  }
  // Keep the longest tail that is a proper prefix of some stop string. Stop strings are
  // valid UTF-8, so such a tail starts on a character boundary and the release never
  // splits a character.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    for (size_t k = std::min(held_.size(), s.size() - 1); k > keep; --k) {
      if (std::string_view(held_).substr(held_.size() - k) == std::string_view(s).substr(0, k)) {
        keep = k;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStringFilter::flush() {
  if (stopped_) return {};
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace th::server
