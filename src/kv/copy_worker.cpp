#include "kv/copy_worker.h"

#include <pthread.h>

namespace th {

CopyWorker::~CopyWorker() {
  if (!thread_.joinable()) return;
  {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return !busy_; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CopyWorker::run(std::function<void()> job) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return !busy_; });
  if (!thread_.joinable()) thread_ = std::thread(&CopyWorker::loop, this);
  job_ = std::move(job);
  busy_ = true;
  l.unlock();
  cv_.notify_all();
}

void CopyWorker::wait() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return !busy_; });
}

void CopyWorker::loop() {
  pthread_setname_np(pthread_self(), "th-kv-copy");
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return stop_ || busy_; });
    if (stop_) return;
    std::function<void()> job = std::move(job_);
    l.unlock();
    job();  // the manager's copies: no exception escapes them (memcpy and OpenSSL calls)
    l.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace th
