#include "http/request_id.h"

#include <cstdio>
#include <random>

namespace th::http {

RequestIdGenerator::RequestIdGenerator() : prefix_(std::random_device{}()) {}

std::string RequestIdGenerator::next() {
  const uint64_t n = counter_.fetch_add(1, std::memory_order_relaxed) + 1;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08x-%llu", prefix_, static_cast<unsigned long long>(n));
  return buf;
}

}  // namespace th::http
