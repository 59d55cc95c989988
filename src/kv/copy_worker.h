// One background thread that runs one job at a time: the KV cache manager's
// host-to-primary copies (prefetch), started after a step's KV transaction is
// prepared and waited for before it commits, so the copies overlap the step's
// forward pass and nothing else touches the KV state while they run.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace th {

class CopyWorker {
 public:
  CopyWorker() = default;
  CopyWorker(const CopyWorker&) = delete;
  CopyWorker& operator=(const CopyWorker&) = delete;
  /// @brief Waits for the job in flight, then stops the thread.
  ~CopyWorker();

  /// @brief Starts `job` on the thread (started on first use); waits for the previous job first.
  void run(std::function<void()> job);
  /// @brief Returns once no job is in flight.
  void wait();

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool busy_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace th
