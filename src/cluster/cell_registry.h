// The cluster's membership on etcd: which engine cells are up, and where.
//
// A cell (`tokenhive serve --discovery etcd://H:P`) holds a CellRegistration:
// the key `/tokenhive/cells/<id>` with the value `{"url":"http://...","id":"<id>"}`,
// attached to a lease of `ttl` seconds (default 2, which is also etcd's
// minimum with its default timing: etcd raises anything below
// ceil(1.5 x election timeout) = 2 s to that). A thread renews the lease
// every ttl/3; when etcd says the lease is gone (it expired during a
// partition, or etcd lost its data) it grants a new one and puts the key
// again; every few renewals it also checks that the key still holds its
// value and puts it back if someone deleted it. stop() (and the destructor)
// revokes the lease, so a draining cell leaves the set at once; a cell that
// dies without that leaves it when the lease expires, ttl seconds (up to
// ttl + 0.5 s: etcd looks for expired leases twice a second) after its last
// renewal. When etcd restarts, leases survive it (and are renewed for a full
// TTL on restart), so a registration is seen again as soon as etcd is.
//
// A router (`tokenhive router --discovery etcd://H:P`) holds a CellWatcher:
// a thread that reads the prefix, then watches it from the revision read + 1,
// keeping a map id -> url. cells() is the current set; on_change() callbacks
// get every new set. When the watch fails (etcd restarted, partition,
// compaction), the thread reads the whole prefix again after a backoff
// (100 ms doubling to 2 s, reset by a successful read) and watches from
// there, so the set is never left out of date once etcd answers again; while
// etcd is unreachable it keeps the last set it saw (a router should keep
// routing to the cells it knew; their own health decides). A partition that
// leaves the watch's TCP connection open goes unnoticed until it breaks
// (etcd_client.h): until then the set can be stale (cells gone still in it,
// new ones missing).
//
// These classes know nothing of routing; they only keep the set.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/status.h"
#include "cluster/etcd_client.h"

namespace th::cluster {

/// @brief Where cells register unless told otherwise.
inline constexpr std::string_view kDefaultCellPrefix = "/tokenhive/cells/";

/// @brief Called with one line about a change of state (lost lease, etcd
/// unreachable, recovered); nullptr: such lines go to stderr.
using DiscoveryLog = std::function<void(std::string_view line)>;

/// @brief A cell id: 1..128 of [A-Za-z0-9_.:-] (it becomes a key's last part).
Status validate_cell_id(std::string_view id);

/// @brief The value a registration puts: {"url":URL,"id":ID}.
std::string cell_value_json(std::string_view id, std::string_view url);

struct CellRegistrationOptions {
  std::chrono::seconds ttl{2};
  std::string prefix{kDefaultCellPrefix};
  EtcdClientOptions etcd;
  // Renewals between two checks that the key still holds our value (0: never).
  int verify_every = 3;
  DiscoveryLog log;
};

class CellRegistration {
 public:
  /// @brief Registers cell `id` at `url` on the etcd at `endpoint` (a lease,
  /// then the key) and starts renewing it. An error, and nothing left behind,
  /// when the endpoint or id is bad or etcd does not answer now: a cell
  /// started with --discovery should not run unseen without saying so.
  static Result<std::unique_ptr<CellRegistration>> start(std::string_view endpoint, std::string id, std::string url,
                                                         CellRegistrationOptions options = {});
  /// @brief stop().
  ~CellRegistration();
  CellRegistration(const CellRegistration&) = delete;
  CellRegistration& operator=(const CellRegistration&) = delete;

  /// @brief Stops renewing and revokes the lease, so the key goes at once.
  /// Idempotent; the error of the revoke, if any (the lease then expires after the TTL).
  Status stop();
  /// @brief For tests: stops renewing without revoking, as a crashed cell
  /// would; the key goes when the lease expires.
  void abandon();

  const std::string& id() const { return id_; }
  const std::string& key() const { return key_; }
  /// @brief The lease the key is attached to now (it changes after a re-grant).
  int64_t lease() const { return lease_.load(); }
  /// @brief Times the registration was made again (new lease, or key put back).
  uint64_t reregistrations() const { return reregistrations_.load(); }

 private:
  CellRegistration(std::unique_ptr<EtcdClient> etcd, std::string id, std::string url, CellRegistrationOptions options);
  Status register_now();  // grant + put
  void run();
  void halt();  // ends the thread
  void log(std::string_view line) const;

  std::unique_ptr<EtcdClient> etcd_;
  std::string id_, url_, key_, value_;
  CellRegistrationOptions options_;
  std::atomic<int64_t> lease_{0};
  std::atomic<uint64_t> reregistrations_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool done_ = false;  // stop() or abandon() ran
  std::thread thread_;
};

/// @brief A cell as the watcher knows it.
struct DiscoveredCell {
  std::string id;
  std::string url;
  int64_t mod_revision = 0;  // the etcd revision of its registration
  bool operator==(const DiscoveredCell& o) const { return id == o.id && url == o.url && mod_revision == o.mod_revision; }
};

struct CellWatcherOptions {
  std::string prefix{kDefaultCellPrefix};
  EtcdClientOptions etcd;
  std::chrono::milliseconds min_backoff{100};
  std::chrono::milliseconds max_backoff{2'000};
  DiscoveryLog log;
};

class CellWatcher {
 public:
  using OnChange = std::function<void(const std::vector<DiscoveredCell>&)>;

  /// @brief Starts watching the cells registered on the etcd at `endpoint`.
  /// An error only for a bad endpoint: while etcd does not answer, the
  /// watcher keeps trying (synced() says whether it has read the set yet).
  static Result<std::unique_ptr<CellWatcher>> start(std::string_view endpoint, CellWatcherOptions options = {});
  /// @brief stop().
  ~CellWatcher();
  CellWatcher(const CellWatcher&) = delete;
  CellWatcher& operator=(const CellWatcher&) = delete;

  /// @brief The cells known now, by id. Empty until the first read.
  std::vector<DiscoveredCell> cells() const;
  /// @brief Sets the callback that gets the whole set (by id) after every
  /// change, on the watcher's thread; when the set has been read already, it
  /// is also called once at once with it. Calls never overlap and never go
  /// back to an older set. nullptr removes it.
  void on_change(OnChange callback);
  /// @brief Whether the prefix has been read at least once.
  bool synced() const;
  /// @brief Waits up to `timeout` for synced().
  bool wait_synced(std::chrono::milliseconds timeout) const;
  /// @brief Successful reads of the whole prefix (1 + recoveries after a failed watch).
  uint64_t resyncs() const { return resyncs_.load(); }
  /// @brief The last error (read or watch), "" when none since the last good read.
  std::string last_error() const;
  /// @brief Ends the thread (within about 100 ms). Idempotent.
  void stop();

 private:
  CellWatcher(std::unique_ptr<EtcdClient> etcd, CellWatcherOptions options);
  void run();
  // Applies a change under mu_; true when the set changed.
  bool apply_put(std::string_view key, std::string_view value, int64_t mod_revision);
  bool apply_delete(std::string_view key);
  void notify();
  void notify_locked();  // callback_mu_ held
  bool sleep_for(std::chrono::milliseconds d);  // false when stopping
  void log(std::string_view line) const;

  std::unique_ptr<EtcdClient> etcd_;
  CellWatcherOptions options_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::map<std::string, DiscoveredCell> cells_;
  bool synced_ = false;
  std::string last_error_;

  std::mutex callback_mu_;  // held while a callback runs: calls are serialized
  OnChange callback_;
  std::optional<std::vector<DiscoveredCell>> notified_;  // the set last passed to callback_

  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> resyncs_{0};
  std::thread thread_;
};

}  // namespace th::cluster
