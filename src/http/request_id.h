// Request ids: a random 32-bit prefix drawn once per server, then a counter,
// "9f3ac1d2-17". Unique within a run by the counter and, with high
// probability, across restarts and cells by the prefix; short enough for
// every log line.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace th::http {

class RequestIdGenerator {
 public:
  RequestIdGenerator();  // prefix from std::random_device
  explicit RequestIdGenerator(uint32_t prefix) : prefix_(prefix) {}

  /// @brief The next id (thread-safe).
  std::string next();

 private:
  uint32_t prefix_;
  std::atomic<uint64_t> counter_{0};
};

}  // namespace th::http
