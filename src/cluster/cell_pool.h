// The cells a router sends work to, and how it knows which are alive.
//
// Each cell has a heartbeat thread: every heartbeat_interval it asks the
// cell for GET /admin/load (running, waiting, KV room, tokens/s, draining)
// with a short timeout, and feeds the answer, or the failure, to the cell's
// FailureDetector. A killed cell refuses the connection (two refusals in a
// row: dead, ~50-100 ms); a hung one (SIGSTOP) accepts and never answers
// (no answer for the detector's timeout: dead, ~250-300 ms). A dead cell
// gets no new work, and every request still running on it is woken at once
// (its cancel flag turns true) so the router can move it elsewhere. A cell
// that answers again is alive again.
//
//   CellPool pool(options);
//   pool.add("http://10.0.0.7:8080", CellSource::kFlag);
//   std::shared_ptr<Cell> cell = pool.pick(policy, request, excluded);
//   CellWork work(cell, priority, tokens, &cancel);   // counted as outstanding; cancelled if the cell dies
//   cell->client().stream_events(..., &cancel);
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "client/http_client.h"
#include "cluster/cell_load.h"
#include "cluster/failure_detector.h"
#include "cluster/routing_policy.h"

namespace th::cluster {

/// @brief How a cell came to be known: `--cell` on the command line (kept while dead:
/// it rejoins when it answers again), `serve --join` (POST /admin/cells), or discovery
/// on etcd.
enum class CellSource : uint8_t { kFlag, kJoin, kDiscovery };

struct CellPoolOptions {
  std::chrono::milliseconds heartbeat_interval{50};
  std::chrono::milliseconds heartbeat_timeout{150};  // one heartbeat's wait for an answer
  FailureDetectorOptions detector;
  // Called (from a heartbeat thread) when a cell is declared dead, with how long after
  // its last answered heartbeat that was.
  std::function<void(const std::string& url, std::chrono::nanoseconds detection)> on_death;
  std::function<void(const std::string& url)> on_alive;  // ... and when one answers again
};

class Cell {
 public:
  Cell(std::string url, CellSource source, std::unique_ptr<client::HttpClient> proxy,
       std::unique_ptr<client::HttpClient> heartbeat, const CellPoolOptions& options);
  /// @brief stop().
  ~Cell();
  Cell(const Cell&) = delete;
  Cell& operator=(const Cell&) = delete;

  const std::string& url() const { return url_; }
  CellSource source() const { return source_; }
  /// @brief The client proxied requests go through (keep-alive pool; no retries of its own).
  client::HttpClient& client() { return *proxy_; }
  /// @brief Alive (answered its last heartbeats) and not draining: may take new work.
  bool eligible() const;
  CellHealth health() const;
  /// @brief The policy's view: load, outstanding tokens per priority, eligibility.
  CellView view() const;
  nlohmann::json describe() const;
  /// @brief Counts an answer the router did not pass on (bounded_json.h, check_cell_answer):
  /// /admin/cells shows it as invalid_answers.
  void note_invalid_answer() { invalid_answers_.fetch_add(1, std::memory_order_relaxed); }
  /// @brief Ends the heartbeat thread; requests running on the cell go on.
  void stop();

 private:
  friend class CellWork;
  void heartbeat_loop();
  bool eligible_locked() const;  // mu_ held
  void declare_dead();

  const std::string url_;
  const CellSource source_;
  std::unique_ptr<client::HttpClient> proxy_, heartbeat_;
  const CellPoolOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::atomic<bool> stop_flag_{false};  // cuts a heartbeat in progress
  FailureDetector detector_;
  CellLoad load_;
  std::map<int32_t, int64_t> outstanding_;      // priority -> tokens of requests running here
  std::set<std::atomic<bool>*> running_;        // cancel flags of requests running here
  int64_t requests_ = 0;                        // requests sent here, ever
  std::atomic<int64_t> invalid_answers_{0};     // answers not passed on, ever
  std::thread thread_;
};

/// @brief One request's attempt on a cell, for as long as it runs there: its tokens count
/// as the cell's outstanding work, and `cancel` turns true if the cell is declared dead.
class CellWork {
 public:
  CellWork(std::shared_ptr<Cell> cell, int32_t priority, int64_t tokens, std::atomic<bool>* cancel);
  ~CellWork();
  CellWork(const CellWork&) = delete;
  CellWork& operator=(const CellWork&) = delete;

 private:
  std::shared_ptr<Cell> cell_;
  int32_t priority_;
  int64_t tokens_;
  std::atomic<bool>* cancel_;
};

class CellPool {
 public:
  explicit CellPool(CellPoolOptions options);
  ~CellPool();
  CellPool(const CellPool&) = delete;
  CellPool& operator=(const CellPool&) = delete;

  /// @brief Adds the cell at `url` (http://host:port) and starts its heartbeats; a URL
  /// already known keeps its cell. An error for a malformed URL.
  Status add(const std::string& url, CellSource source);
  /// @brief Forgets the cell at `url` (a cell leaving); its running requests go on.
  void remove(const std::string& url);
  /// @brief Discovery's current set: discovered cells not in `urls` are removed, new ones added.
  void set_discovered(const std::vector<std::string>& urls);

  /// @brief The cell `policy` picks for `request` among eligible cells not in `excluded`;
  /// null when there is none.
  std::shared_ptr<Cell> pick(const RoutingPolicy& policy, const RouteRequest& request,
                             const std::set<std::string>& excluded) const;
  /// @brief Any eligible cell (for requests that need no routing, like /v1/models); null if none.
  std::shared_ptr<Cell> any_eligible() const;
  std::vector<std::shared_ptr<Cell>> cells() const;
  size_t eligible_count() const;

 private:
  CellPoolOptions options_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Cell>> cells_;
};

}  // namespace th::cluster
