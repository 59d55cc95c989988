#include "client/response_cache.h"

#include <nlohmann/json.hpp>

namespace th::client {

std::optional<std::string> ResponseCache::key_for(std::string_view method, std::string_view path,
                                                  std::string_view body, const std::vector<Header>& headers) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  const auto temperature = j.find("temperature");
  if (temperature == j.end() || !temperature->is_number() || temperature->get<double>() != 0.0) return std::nullopt;
  const auto stream = j.find("stream");
  if (stream != j.end() && !stream->is_null() && !(stream->is_boolean() && !stream->get<bool>())) return std::nullopt;
  // Length-prefixed parts: no two different requests give the same key.
  std::string key;
  auto add = [&key](std::string_view part) {
    key += std::to_string(part.size());
    key += ':';
    key.append(part);
  };
  add(method);
  add(path);
  add(body);
  for (const Header& h : headers) {
    add(to_lower_ascii(h.name));
    add(h.value);
  }
  return key;
}

size_t ResponseCache::cost(const std::string& key, const Response& response) {
  size_t n = key.size() + response.body.size() + 64;
  for (const Header& h : response.headers) n += h.name.size() + h.value.size() + 16;
  return n;
}

std::optional<Response> ResponseCache::get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = index_.find(key);
  if (it == index_.end()) {
    ++misses_;
    return std::nullopt;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->response;
}

void ResponseCache::put(const std::string& key, const Response& response) {
  if (response.status != 200) return;
  const size_t bytes = cost(key, response);
  if (bytes > options_.max_bytes || options_.max_entries == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (const auto it = index_.find(key); it != index_.end()) {
    bytes_ -= it->second->bytes;
    const auto entry = it->second;
    index_.erase(it);
    lru_.erase(entry);
  }
  Entry e{key, response, bytes};
  e.response.attempts = 1;
  e.response.from_cache = false;
  lru_.push_front(std::move(e));
  index_.emplace(lru_.front().key, lru_.begin());
  bytes_ += bytes;
  evict_over_limits();
}

void ResponseCache::evict_over_limits() {
  while (!lru_.empty() && (lru_.size() > options_.max_entries || bytes_ > options_.max_bytes)) {
    bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
}

size_t ResponseCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}
size_t ResponseCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}
uint64_t ResponseCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}
uint64_t ResponseCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace th::client
