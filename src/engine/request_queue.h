// Where submitted requests wait for the engine thread: any thread pushes, the
// engine thread takes everything at the start of each step.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/request.h"
#include "engine/request_stream.h"

namespace th {

struct SubmittedRequest {
  uint64_t id = 0;
  GenerateRequest request;
  std::shared_ptr<RequestChannel> channel;
  std::chrono::steady_clock::time_point submitted;
};

class RequestQueue {
 public:
  void push(SubmittedRequest r) {
    std::lock_guard<std::mutex> l(m_);
    items_.push_back(std::move(r));
  }
  /// @brief Everything queued, in submission order.
  std::vector<SubmittedRequest> take_all() {
    std::lock_guard<std::mutex> l(m_);
    std::vector<SubmittedRequest> out;
    out.swap(items_);
    return out;
  }
  size_t size() const {
    std::lock_guard<std::mutex> l(m_);
    return items_.size();
  }

 private:
  mutable std::mutex m_;
  std::vector<SubmittedRequest> items_;
};

}  // namespace th
