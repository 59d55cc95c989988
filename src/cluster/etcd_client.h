// A small etcd v3 client over etcd's JSON gateway (grpc-gateway; etcd 3.4
// serves it at /v3/ on every client URL): key-value puts, prefix reads and
// deletes, leases, and prefix watches. Enough for cell discovery
// (cell_registry.h), nothing more: no transactions, no auth, no TLS.
//
//   TH_ASSIGN_OR_RETURN(auto etcd, EtcdClient::create("etcd://127.0.0.1:2379"));
//   TH_ASSIGN_OR_RETURN(int64_t lease, etcd->grant_lease(std::chrono::seconds(2)));
//   TH_ASSIGN_OR_RETURN(int64_t rev, etcd->put("/tokenhive/cells/a", "{...}", lease));
//   TH_ASSIGN_OR_RETURN(RangeResult r, etcd->range_prefix("/tokenhive/cells/"));
//   etcd->watch_prefix("/tokenhive/cells/", r.revision + 1, on_event, &stop);
//
// Unary calls (put, range, deleterange, lease grant/keepalive/revoke) go
// through one th::client::HttpClient (keep-alive pool, retries of failed
// connects and 502-504, client/retry_policy.h) with a short request timeout.
// A lease keepalive is one POST to /v3/lease/keepalive (a bidirectional
// stream in gRPC; the gateway sends the one request of the body and ends the
// stream at its end), answered `{"result":{"ID":"..","TTL":".."}}`, without
// TTL when the lease is gone.
//
// Watches use a connection of their own, read in slices of at most 50 ms so
// that `*stop` takes effect within that even when no event comes. (HttpClient
// cannot be interrupted while it waits for bytes; cutting the watch with a
// short request timeout and watching again from the last revision + 1 was
// the alternative, rejected because etcd delivers a watch's past events
// only from a background sync that runs every 100 ms: a watch started on an
// old revision and cut every 100 ms could miss its history again and again.)
// One long-lived watch also costs etcd a single watcher, not ten a second.
//
// A watch sees a closed connection at once (etcd stopped or crashed: the
// kernel closes its sockets), but not a silent partition that leaves the TCP
// connection open; the gateway offers no heartbeat short of etcd's
// --experimental-watch-progress-notify-interval (10 min by default).
//
// Errors name the endpoint and the call: "etcd http://127.0.0.1:2379:
// lease/revoke: etcdserver: requested lease not found (grpc code 5), HTTP 404".
// All methods are safe to call from several threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "client/http_client.h"
#include "cluster/etcd_codec.h"

namespace th::cluster {

struct EtcdClientOptions {
  // A unary call as a whole (its retries included).
  std::chrono::milliseconds request_timeout{2'000};
  std::chrono::milliseconds connect_timeout{1'000};
  // How often a watch looks at its stop flag while no bytes come.
  std::chrono::milliseconds watch_poll{50};
};

/// @brief A key and its value as read by a range.
struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;  // 0: no lease
};

/// @brief The answer to range_prefix(): the keys in key order, and the
/// store's revision they were read at (watch from revision + 1 to miss nothing).
struct RangeResult {
  std::vector<KeyValue> kvs;
  int64_t revision = 0;
};

class EtcdClient {
 public:
  /// @brief A client for the etcd member at `endpoint`, "etcd://host:port" or
  /// "http://host:port" (a trailing '/' is accepted; a path, https and user
  /// info are not). Nothing is sent yet.
  static Result<std::unique_ptr<EtcdClient>> create(std::string_view endpoint, EtcdClientOptions options = {});
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  /// @brief The endpoint as http://host:port (what error messages name).
  const std::string& endpoint() const { return endpoint_; }

  /// @brief Grants a lease of `ttl` seconds; its ID. etcd raises a TTL below
  /// its minimum (2 s with the default --heartbeat-interval 100 ms and
  /// --election-timeout 1000 ms: ceil(1.5 x election timeout)) to that minimum.
  Result<int64_t> grant_lease(std::chrono::seconds ttl);
  /// @brief Renews `lease` once; an error when it is gone (expired or
  /// revoked: the answer has TTL 0) or etcd did not answer.
  Status keep_alive(int64_t lease);
  /// @brief As keep_alive(), but gives the TTL the lease was renewed to:
  /// 0 when the lease is gone (not an error), an error only when etcd did not answer.
  Result<int64_t> keep_alive_ttl(int64_t lease);
  /// @brief Revokes `lease`: it and every key attached to it are deleted at
  /// once. An error when the lease does not exist (any more).
  Status revoke(int64_t lease);

  /// @brief Sets `key` to `value`, attached to `lease` (0: none); the
  /// revision of the change. An error when the lease does not exist.
  Result<int64_t> put(std::string_view key, std::string_view value, int64_t lease = 0);
  /// @brief Every key starting with `prefix` ("" for all), with the revision read at.
  Result<RangeResult> range_prefix(std::string_view prefix);
  /// @brief Deletes `key` (not an error when it does not exist).
  Status delete_key(std::string_view key);

  /// @brief Watches every key starting with `prefix` from `start_revision`
  /// (0: from now; <= the current revision: past changes first), calling
  /// `on_event` for each change, in revision order. Returns ok when on_event
  /// returned false or `*stop` (may be null) became true, within about
  /// EtcdClientOptions::watch_poll; an error when the connection failed or
  /// closed, or etcd ended the watch (e.g. "start revision 5 compacted:
  /// re-read and watch from the compact revision"). Blocks the calling thread.
  Status watch_prefix(std::string_view prefix, int64_t start_revision,
                      std::function<bool(const WatchEvent&)> on_event, const std::atomic<bool>* stop);

 private:
  EtcdClient(std::string endpoint, client::BaseUrl base, EtcdClientOptions options,
             std::unique_ptr<client::HttpClient> http);
  // POSTs `body` to /v3/`call`; the parsed JSON answer, or an error naming the call.
  Result<std::string> call(std::string_view call, const std::string& body);
  Status error(std::string_view call, std::string_view what) const;

  std::string endpoint_;
  client::BaseUrl base_;
  EtcdClientOptions options_;
  std::unique_ptr<client::HttpClient> http_;
};

}  // namespace th::cluster
