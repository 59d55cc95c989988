// How the CUDA backend runs a step (included by .cu files only).
//
// An op does not launch its kernels when it is called: it records them (Launches::add)
// with a key of everything they are launched with (kernel, pointers, shapes), and copies
// the small host arrays it brings (positions, slots, block tables, embedding rows) into
// pinned host memory (Staging::put). The recorded launches run when the host needs the
// device's results or is about to change memory they use (read, copy_to_host, free, ...):
// first one asynchronous copy of the staged bytes, then the launches, all on one stream.
// A sequence of launches whose key ran before is replayed from a CUDA graph captured the
// second time it ran: one launch for the whole decode step instead of hundreds, each of
// which costs the host microseconds while the GPU waits. The key holds every argument, so
// a replay launches what the ops would have launched one by one, bit for bit.
#pragma once

#include <cstring>
#include <functional>
#include <initializer_list>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cuda_common.h"

namespace th::cuda {

/// The key of a sequence of launches: FNV-1a over 64-bit words.
struct LaunchKey {
  uint64_t h = 0xcbf29ce484222325ull;
  template <class T>
  void mix(const T& v) {
    uint64_t w = 0;
    std::memcpy(&w, &v, sizeof(T) < 8 ? sizeof(T) : 8);
    h = (h ^ w) * 0x100000001b3ull;
  }
  template <class... A>
  void mix_all(const A&... a) {
    (mix(a), ...);
  }
};

/// The per-call host arrays of the step being recorded, in pinned memory, sent to the device
/// in one copy when the step runs. Each array takes a power-of-two slot (at least 256 bytes),
/// so the slots, and the device pointers the kernels get, stay where they were from one
/// decode step to the next while the arrays grow.
class Staging {
 public:
  /// flush runs the recorded step (its copy included) when the next array does not fit.
  explicit Staging(std::function<void()> flush) : flush_(std::move(flush)) {}
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  ~Staging() { release(); }

  /// Room for arrays of these sizes in the step being recorded: call before an op's first
  /// put when it puts several (a flush or a regrowth between them would lose the earlier ones).
  void make_room(std::initializer_list<size_t> sizes) {
    size_t total = 0;
    for (size_t b : sizes) total += slot_bytes(b);
    room(total);
  }
  template <class T>
  const T* put(const T* host, int64_t n, LaunchKey& key) {
    const size_t bytes = static_cast<size_t>(n < 0 ? 0 : n) * sizeof(T);
    void* d = put_bytes(host, bytes);
    key.mix_all(d, slot_bytes(bytes));
    return static_cast<const T*>(d);
  }
  /// One asynchronous copy of what was put since the last send, on stream s; the next put
  /// starts again at the first slot (after waiting for this copy to have read it).
  void send(cudaStream_t s) {
    if (at_ == 0) return;
    TH_CUDA_CHECK(cudaMemcpyAsync(dev_, host_, at_, cudaMemcpyHostToDevice, s));
    TH_CUDA_CHECK(cudaEventRecord(sent_, s));
    copy_pending_ = true;
    at_ = 0;
  }

 private:
  static size_t slot_bytes(size_t bytes) {
    size_t s = 256;
    while (s < bytes) s *= 2;
    return s;
  }
  void room(size_t slot) {
    if (at_ + slot > cap_ && at_ > 0) flush_();  // sends: at_ is 0 after
    if (slot > cap_) {
      flush_();
      TH_CUDA_CHECK(cudaDeviceSynchronize());
      release();
      cap_ = slot * 2 > (size_t{16} << 20) ? slot * 2 : (size_t{16} << 20);
      TH_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_), cap_, cudaHostAllocDefault));
      TH_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dev_), cap_));
      TH_CUDA_CHECK(cudaEventCreateWithFlags(&sent_, cudaEventDisableTiming));
    }
  }
  void* put_bytes(const void* host, size_t bytes) {
    const size_t slot = slot_bytes(bytes);
    room(slot);
    if (copy_pending_) {  // the last send's copy must have read the bytes before they change
      TH_CUDA_CHECK(cudaEventSynchronize(sent_));
      copy_pending_ = false;
    }
    if (bytes) std::memcpy(host_ + at_, host, bytes);
    void* d = dev_ + at_;
    at_ += slot;
    return d;
  }
  void release() {
    if (host_) cudaFreeHost(host_);
    if (dev_) cudaFree(dev_);
    if (sent_) cudaEventDestroy(sent_);
    host_ = dev_ = nullptr;
    sent_ = nullptr;
    cap_ = at_ = 0;
    copy_pending_ = false;
  }
  std::function<void()> flush_;
  uint8_t* host_ = nullptr;
  uint8_t* dev_ = nullptr;
  cudaEvent_t sent_ = nullptr;
  bool copy_pending_ = false;
  size_t cap_ = 0, at_ = 0;
};

/// The recorded launches of a step, run one by one or replayed from a CUDA graph.
class Launches {
 public:
  Launches(cudaStream_t s, bool graphs) : s_(s), graphs_on_(graphs) {}
  Launches(const Launches&) = delete;
  Launches& operator=(const Launches&) = delete;
  ~Launches() { drop_graphs(); }

  LaunchKey& key() { return key_; }
  void add(std::function<void()> launch) {
    pending_.push_back(std::move(launch));
    key_.mix(pending_.size());
  }
  bool empty() const { return pending_.empty(); }

  /// Runs what was added, in order on the stream: a graph if this key ran before.
  void run() {
    if (pending_.empty()) return;
    if (graphs_on_) {
      auto it = graphs_.find(key_.h);
      if (it != graphs_.end()) {
        TH_CUDA_CHECK(cudaGraphLaunch(it->second, s_));
        return reset();
      }
      if (seen_.size() > kMaxSeen) seen_.clear();
      if (++seen_[key_.h] >= 2) return capture();
    }
    for (auto& f : pending_) f();
    reset();
  }

 private:
  static constexpr size_t kMaxGraphs = 64, kMaxSeen = 4096;
  void capture() {
    TH_CUDA_CHECK(cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal));
    for (auto& f : pending_) f();
    cudaGraph_t g = nullptr;
    TH_CUDA_CHECK(cudaStreamEndCapture(s_, &g));
    cudaGraphExec_t exec = nullptr;
    TH_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    TH_CUDA_CHECK(cudaGraphDestroy(g));
    if (graphs_.size() >= kMaxGraphs) drop_graphs();
    graphs_[key_.h] = exec;
    TH_CUDA_CHECK(cudaGraphLaunch(exec, s_));
    reset();
  }
  void reset() {
    pending_.clear();
    key_ = LaunchKey();
  }
  void drop_graphs() {
    for (auto& [k, g] : graphs_) cudaGraphExecDestroy(g);
    graphs_.clear();
  }
  cudaStream_t s_;
  bool graphs_on_;
  std::vector<std::function<void()>> pending_;
  LaunchKey key_;
  std::unordered_map<uint64_t, int> seen_;
  std::unordered_map<uint64_t, cudaGraphExec_t> graphs_;
};

}  // namespace th::cuda
