#include "bench/load_driver.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

#include "bench/arrival_process.h"

namespace th::bench {

namespace {

// The worker threads: one per request in flight, created when none is idle and kept for
// later requests, so a blocking Sender never holds up the schedule. Peak threads =
// peak requests in flight (the cap when there is one).
class LoadRun {
 public:
  LoadRun(const Sender& send, const LoadOptions& o, double start) : send_(send), o_(o), start_(start) {}

  // Blocks while max_concurrency requests are in flight, or until `deadline` (monotonic_s).
  // False when the deadline came first.
  bool acquire_slot(double deadline) {
    std::unique_lock lock(mu_);
    if (o_.max_concurrency <= 0) {
      ++in_flight_;
      max_in_flight_ = std::max(max_in_flight_, in_flight_);
      return true;
    }
    auto free = [&] { return in_flight_ < o_.max_concurrency; };
    if (std::isinf(deadline)) {
      slot_cv_.wait(lock, free);
    } else if (!slot_cv_.wait_until(lock, to_time_point(deadline), free)) {
      return false;
    }
    ++in_flight_;
    max_in_flight_ = std::max(max_in_flight_, in_flight_);
    return true;
  }

  void release_slot() {
    std::lock_guard lock(mu_);
    --in_flight_;
    slot_cv_.notify_one();
  }

  void dispatch(BenchRequest r) {
    std::lock_guard lock(mu_);
    ++sent_;
    queue_.push_back(std::move(r));
    if (static_cast<int64_t>(queue_.size()) > idle_) workers_.emplace_back([this] { work(); });
    work_cv_.notify_one();
  }

  // Waits for every request, then stops the workers.
  void finish() {
    {
      std::lock_guard lock(mu_);
      closing_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& t : workers_) t.join();  // only the dispatching thread touches workers_
  }

  LoadProgress snapshot() {
    std::lock_guard lock(mu_);
    LoadProgress p;
    p.elapsed_s = monotonic_s() - start_;
    p.sent = sent_;
    p.done = static_cast<int64_t>(records_.size());
    p.failed = failed_;
    p.in_flight = in_flight_;
    p.output_tokens = output_tokens_;
    return p;
  }

  std::vector<RequestRecord> take_records() { return std::move(records_); }
  int64_t max_in_flight() const { return max_in_flight_; }

 private:
  static std::chrono::steady_clock::time_point to_time_point(double s) {
    return std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s)));
  }

  void work() {
    std::unique_lock lock(mu_);
    for (;;) {
      ++idle_;
      work_cv_.wait(lock, [&] { return !queue_.empty() || closing_; });
      --idle_;
      if (queue_.empty()) return;  // closing
      BenchRequest r = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      RequestRecord rec = call(r);
      lock.lock();
      --in_flight_;
      slot_cv_.notify_one();
      if (rec.ok) output_tokens_ += rec.output_tokens;
      else ++failed_;
      records_.push_back(std::move(rec));
    }
  }

  RequestRecord call(const BenchRequest& r) {
    RequestRecord rec;
    try {
      rec = send_(r);
    } catch (const std::exception& e) {  // a Sender's exception must not end the run (or the thread)
      rec = RequestRecord{};
      rec.ok = false;
      rec.error = cat("sender threw: ", e.what());
      rec.send_s = rec.end_s = monotonic_s();
    }
    rec.index = r.index;
    rec.priority = r.priority;
    if (rec.prompt_tokens <= 0) rec.prompt_tokens = r.input_tokens_hint;
    if (!rec.ok && rec.error.empty()) rec.error = "failed (no reason given)";
    return rec;
  }

  const Sender& send_;
  const LoadOptions& o_;
  const double start_;
  std::mutex mu_;
  std::condition_variable work_cv_, slot_cv_;
  std::deque<BenchRequest> queue_;
  std::vector<std::thread> workers_;
  std::vector<RequestRecord> records_;
  int64_t idle_ = 0, in_flight_ = 0, max_in_flight_ = 0, sent_ = 0, failed_ = 0, output_tokens_ = 0;
  bool closing_ = false;
};

// Reports progress every interval until stopped; rates over a trailing window of ~5 s.
class ProgressThread {
 public:
  ProgressThread(LoadRun& run, const LoadOptions& o, int64_t target) : run_(run), o_(o), target_(target) {
    if (o_.on_progress) thread_ = std::thread([this] { loop(); });
  }
  ~ProgressThread() { stop(); }

  void stop() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  LoadProgress measure(bool final) {
    LoadProgress p = run_.snapshot();
    p.target = target_;
    p.final = final;
    window_.push_back(p);
    while (window_.size() > 2 && window_.front().elapsed_s < p.elapsed_s - 5.0) window_.pop_front();
    const LoadProgress& first = window_.front();
    const double dt = p.elapsed_s - first.elapsed_s;
    if (dt > 0) {
      p.recent_requests_per_s = static_cast<double>(p.done - first.done) / dt;
      p.recent_tokens_per_s = static_cast<double>(p.output_tokens - first.output_tokens) / dt;
    } else if (p.elapsed_s > 0) {
      p.recent_requests_per_s = static_cast<double>(p.done) / p.elapsed_s;
      p.recent_tokens_per_s = static_cast<double>(p.output_tokens) / p.elapsed_s;
    }
    return p;
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    const auto interval = std::chrono::duration<double>(std::max(0.01, o_.progress_interval_s));
    while (!cv_.wait_for(lock, interval, [&] { return stop_; })) o_.on_progress(measure(false));
  }

  LoadRun& run_;
  const LoadOptions& o_;
  const int64_t target_;
  std::deque<LoadProgress> window_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

void sleep_until_s(double t) {
  const double now = monotonic_s();
  if (t > now) std::this_thread::sleep_for(std::chrono::duration<double>(t - now));
}

}  // namespace

std::string format_progress(const LoadProgress& p) {
  char buf[200];
  const std::string count = p.target >= 0 ? cat(p.done, "/", p.target) : cat(p.done);
  std::snprintf(buf, sizeof buf, "[%s] %.1f s  %.2f req/s  %.1f tok/s  in flight %lld  failed %lld", count.c_str(),
                p.elapsed_s, p.recent_requests_per_s, p.recent_tokens_per_s, static_cast<long long>(p.in_flight),
                static_cast<long long>(p.failed));
  return buf;
}

Result<LoadResult> run_load(const Workload& workload, const Sender& send, const LoadOptions& o) {
  if (o.num_prompts < 0) return Status::error("--num-prompts must be >= 0");
  if (o.num_prompts == 0 && !(o.duration_s > 0)) return Status::error("give --num-prompts or --duration (or both)");
  if (o.duration_s < 0 || std::isnan(o.duration_s)) return Status::error("--duration must be >= 0");
  if (o.max_concurrency < 0) return Status::error("--max-concurrency must be >= 0");
  TH_ASSIGN_OR_RETURN(ArrivalProcess arrivals, ArrivalProcess::create(o.request_rate, o.burstiness, o.seed));

  const double start = monotonic_s();
  const double start_unix =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double deadline = o.duration_s > 0 ? start + o.duration_s : std::numeric_limits<double>::infinity();
  LoadRun run(send, o, start);
  ProgressThread progress(run, o, o.num_prompts > 0 ? o.num_prompts : -1);
  double next_arrival = start;  // the first request goes at once, as vLLM's
  for (int64_t i = 0; o.num_prompts == 0 || i < o.num_prompts; ++i) {
    BenchRequest r = workload.request(i);  // made before its time, so making it never delays it
    if (next_arrival >= deadline) break;
    sleep_until_s(next_arrival);
    // A request that waits for a slot is sent when one frees; later arrivals keep their times.
    if (!run.acquire_slot(deadline)) break;
    if (monotonic_s() >= deadline) {
      run.release_slot();
      break;
    }
    run.dispatch(std::move(r));
    next_arrival += arrivals.next_interval();
  }
  run.finish();
  const double end = monotonic_s();
  progress.stop();

  LoadResult result;
  result.duration_s = end - start;
  result.start_unix_s = start_unix;
  result.max_in_flight = run.max_in_flight();
  if (o.on_progress) o.on_progress(progress.measure(true));
  result.records = run.take_records();
  for (RequestRecord& r : result.records) {
    r.send_s -= start;
    r.first_token_s = r.first_token_s > 0 ? r.first_token_s - start : 0;
    r.end_s -= start;
    for (double& t : r.token_times_s) t -= start;
  }
  std::sort(result.records.begin(), result.records.end(),
            [](const RequestRecord& a, const RequestRecord& b) { return a.index < b.index; });
  return result;
}

}  // namespace th::bench
