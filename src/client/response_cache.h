// A cache of responses to identical greedy requests, off by default.
//
// Only a request whose body is a JSON object with "temperature": 0 (a number
// equal to zero, given explicitly: absent means the server's default, 1) and
// no "stream" (absent, null or false) is cacheable: greedy decoding gives the
// same text every time, so the second identical request need not reach the
// server. The key is (method, path, body, the call's extra headers) byte for
// byte. Only 200 responses are stored. Least recently used entries go first
// when the cache holds more than max_entries or max_bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "client/response.h"

namespace th::client {

struct ResponseCacheOptions {
  bool enabled = false;
  size_t max_entries = 1024;
  size_t max_bytes = 64u << 20;  // keys, bodies and headers together
};

class ResponseCache {
 public:
  explicit ResponseCache(ResponseCacheOptions options) : options_(options) {}

  /// @brief The key of a cacheable request, nullopt when it is not cacheable.
  static std::optional<std::string> key_for(std::string_view method, std::string_view path, std::string_view body,
                                            const std::vector<Header>& headers);

  /// @brief The stored response for `key` (now the most recently used), or nullopt.
  std::optional<Response> get(const std::string& key);
  /// @brief Stores a 200 response under `key` (others are ignored), evicting
  /// the least recently used entries over the limits. A response larger than
  /// max_bytes alone is not stored.
  void put(const std::string& key, const Response& response);

  size_t size() const;
  size_t bytes() const;
  uint64_t hits() const;
  uint64_t misses() const;

 private:
  struct Entry {
    std::string key;
    Response response;
    size_t bytes = 0;
  };
  static size_t cost(const std::string& key, const Response& response);
  void evict_over_limits();  // with mu_ held

  ResponseCacheOptions options_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index_;  // views into lru_'s keys
  size_t bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace th::client
