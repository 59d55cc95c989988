// How a cell becomes known to routers, for `tokenhive serve --join` and
// `--discovery`:
//   --join ROUTER_URL: POST ROUTER/admin/cells {"url": ADVERTISE}, retried
//     with backoff until the router answers, then again every 5 s (a no-op
//     for a router that has the cell; a restarted router gets it back). A router that itself finds its
//     cells on etcd answers {"discovery": "etcd://..."}: the cell then
//     registers there, under its own lease, so no router holds its
//     registration and losing a router loses none.
//   --discovery etcd://HOST:PORT: register on etcd directly.
// leave() (on SIGTERM, before draining): POST /admin/cells/leave to the
// router, or revoke the etcd lease, so routers send no new work; requests
// in flight go on.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"

namespace th::cluster {

class CellRegistration;

struct CellMembershipOptions {
  std::string join;         // a router's base URL ("" : none)
  std::string discovery;    // etcd://host:port ("" : none)
  std::string advertise;    // this cell's base URL as routers reach it
  std::string admin_token;  // sent to the router's /admin/cells
};

class CellMembership {
 public:
  /// @brief Starts joining (in the background: a router not up yet is retried). Registering
  /// on etcd directly is done at once, and its failure is the error.
  static Result<std::unique_ptr<CellMembership>> start(CellMembershipOptions options);
  /// @brief leave().
  ~CellMembership();
  CellMembership(const CellMembership&) = delete;
  CellMembership& operator=(const CellMembership&) = delete;

  /// @brief Leaves every router (idempotent).
  void leave();
  /// @brief True once a router (or etcd) has the cell.
  bool joined() const { return joined_.load(); }

 private:
  explicit CellMembership(CellMembershipOptions options);
  void join_loop();

  CellMembershipOptions options_;
  std::unique_ptr<CellRegistration> registration_;
  std::atomic<bool> joined_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace th::cluster
