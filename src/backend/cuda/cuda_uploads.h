// The CUDA backend's device copies of host arrays that stay the same from call to call
// (norm weights, biases, rope frequencies): uploaded once and kept, keyed by their host
// address (or by their bytes), and compared with the host's bytes at every call: a changed
// array is sent again (included by .cu files only; per-call arrays go through
// cuda_step.h's Staging).
#pragma once

#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cuda_common.h"

namespace th::cuda {

class ConstCache {
 public:
  /// before_change runs before any device copy is rewritten or freed.
  explicit ConstCache(std::function<void()> before_change) : before_change_(std::move(before_change)) {}
  ConstCache(const ConstCache&) = delete;
  ConstCache& operator=(const ConstCache&) = delete;
  ~ConstCache() { clear(); }

  /// The device copy of host[0..n), keyed by host's address.
  template <class T>
  const T* by_address(const T* host, int64_t n) {
    return static_cast<const T*>(get(by_address_[host], host, static_cast<size_t>(n) * sizeof(T)));
  }
  /// The device copy of host[0..n), keyed by its bytes (for arrays computed at each call).
  template <class T>
  const T* by_bytes(const T* host, int64_t n) {
    const size_t bytes = static_cast<size_t>(n) * sizeof(T);
    return static_cast<const T*>(get(by_bytes_[std::string(reinterpret_cast<const char*>(host), bytes)], host, bytes));
  }

 private:
  struct Entry {
    std::vector<uint8_t> bytes;  // what dev holds
    void* dev = nullptr;
    size_t cap = 0;
  };
  static constexpr size_t kMaxEntries = 4096;  // tests pass fresh arrays at every call

  const void* get(Entry& e, const void* host, size_t bytes) {
    if (e.dev && e.bytes.size() == bytes && std::memcmp(e.bytes.data(), host, bytes) == 0) return e.dev;
    before_change_();  // launches recorded but not yet run may read what is about to change
    if (by_address_.size() + by_bytes_.size() > kMaxEntries) {
      // Entries are about to be freed, e among them: upload into a fresh one.
      std::vector<uint8_t> copy(static_cast<const uint8_t*>(host), static_cast<const uint8_t*>(host) + bytes);
      clear();
      Entry& fresh = by_bytes_[std::string(copy.begin(), copy.end())];
      return get(fresh, copy.data(), bytes);
    }
    if (e.cap < bytes) {
      if (e.dev) TH_CUDA_CHECK(cudaFree(e.dev));  // waits for the kernels that read it
      TH_CUDA_CHECK(cudaMalloc(&e.dev, bytes < 16 ? 16 : bytes));
      e.cap = bytes < 16 ? 16 : bytes;
    }
    e.bytes.assign(static_cast<const uint8_t*>(host), static_cast<const uint8_t*>(host) + bytes);
    // In order after every kernel queued before (pageable memory: the copy waits for them),
    // so none of them sees the new bytes.
    if (bytes) TH_CUDA_CHECK(cudaMemcpy(e.dev, e.bytes.data(), bytes, cudaMemcpyHostToDevice));
    return e.dev;
  }
  void clear() {
    for (auto& [k, e] : by_address_) cudaFree(e.dev);
    for (auto& [k, e] : by_bytes_) cudaFree(e.dev);
    by_address_.clear();
    by_bytes_.clear();
  }
  std::function<void()> before_change_;
  std::unordered_map<const void*, Entry> by_address_;
  std::map<std::string, Entry> by_bytes_;
};

}  // namespace th::cuda
