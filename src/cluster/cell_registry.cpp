#include "cluster/cell_registry.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cluster/bounded_json.h"

namespace th::cluster {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

void write_log(const DiscoveryLog& log, std::string_view line) {
  if (log) {
    log(line);
  } else {
    std::fprintf(stderr, "discovery: %.*s\n", static_cast<int>(line.size()), line.data());
  }
}

// The url of a registration's value, or "" when it is not one.
std::string url_of(std::string_view value) {
  const Result<json> parsed = parse_json_bounded(value, kControlLimits);
  if (!parsed.ok() || !parsed->is_object()) return {};
  const json& j = *parsed;
  const auto it = j.find("url");
  if (it == j.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

}  // namespace

Status validate_cell_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return Status::errorf("cell id must be 1..128 characters, got ", id.size());
  for (const char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                    c == ':' || c == '-';
    if (!ok) return Status::error("cell id may hold only letters, digits and _ . : -");
  }
  return ok_status();
}

std::string cell_value_json(std::string_view id, std::string_view url) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["url"] = std::string(url);
  j["id"] = std::string(id);
  return j.dump();
}

// ---------------------------------------------------------------------------
// CellRegistration

Result<std::unique_ptr<CellRegistration>> CellRegistration::start(std::string_view endpoint, std::string id,
                                                                   std::string url, CellRegistrationOptions options) {
  TH_RETURN_IF_ERROR(validate_cell_id(id));
  if (url.empty()) return Status::error("cell registration: empty url");
  if (options.ttl.count() < 1) return Status::error("cell registration: ttl must be at least 1 s");
  TH_ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> etcd, EtcdClient::create(endpoint, options.etcd));
  std::unique_ptr<CellRegistration> r(new CellRegistration(std::move(etcd), std::move(id), std::move(url), std::move(options)));
  TH_RETURN_IF_ERROR(r->register_now());
  r->thread_ = std::thread([p = r.get()] { p->run(); });
  return r;
}

CellRegistration::CellRegistration(std::unique_ptr<EtcdClient> etcd, std::string id, std::string url,
                                   CellRegistrationOptions options)
    : etcd_(std::move(etcd)),
      id_(std::move(id)),
      url_(std::move(url)),
      key_(options.prefix + id_),
      value_(cell_value_json(id_, url_)),
      options_(std::move(options)) {}

CellRegistration::~CellRegistration() { (void)stop(); }

void CellRegistration::log(std::string_view line) const { write_log(options_.log, cat("cell ", id_, ": ", line)); }

Status CellRegistration::register_now() {
  TH_ASSIGN_OR_RETURN(int64_t lease, etcd_->grant_lease(options_.ttl));
  Result<int64_t> put = etcd_->put(key_, value_, lease);
  if (!put.ok()) {
    (void)etcd_->revoke(lease);
    return put.status();
  }
  lease_.store(lease);
  return ok_status();
}

void CellRegistration::run() {
  const auto interval = std::max<std::chrono::milliseconds>(
      std::chrono::duration_cast<std::chrono::milliseconds>(options_.ttl) / 3, std::chrono::milliseconds(100));
  bool failing = false;  // the last try did not renew: log only changes of state
  uint64_t renewals = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, interval, [this] { return stopping_; })) return;
    }
    const int64_t lease = lease_.load();
    if (lease == 0) {
      // The lease is gone: a new one and the key again.
      Status s = register_now();
      if (s.ok()) {
        reregistrations_.fetch_add(1);
        log(cat("registered again as ", key_, " (lease ", lease_.load(), ")"));
        failing = false;
      } else if (!failing) {
        log(cat("cannot register again, will keep trying: ", s.message()));
        failing = true;
      }
      continue;
    }
    Result<int64_t> ttl = etcd_->keep_alive_ttl(lease);
    if (!ttl.ok()) {
      if (!failing) log(cat("cannot renew lease ", lease, ", will keep trying: ", ttl.message()));
      failing = true;
      continue;
    }
    if (*ttl == 0) {
      log(cat("lease ", lease, " is gone (expired or etcd lost it); registering again"));
      lease_.store(0);
      Status s = register_now();
      if (s.ok()) {
        reregistrations_.fetch_add(1);
        log(cat("registered again as ", key_, " (lease ", lease_.load(), ")"));
        failing = false;
      } else {
        log(cat("cannot register again, will keep trying: ", s.message()));
        failing = true;
      }
      continue;
    }
    if (failing) log(cat("lease ", lease, " renewed again"));
    failing = false;
    if (options_.verify_every > 0 && ++renewals % static_cast<uint64_t>(options_.verify_every) == 0) {
      // Someone may have deleted the key while the lease lived on.
      Result<RangeResult> r = etcd_->range_prefix(key_);
      if (!r.ok()) continue;
      const bool present = std::any_of(r->kvs.begin(), r->kvs.end(), [this, lease](const KeyValue& kv) {
        return kv.key == key_ && kv.value == value_ && kv.lease == lease;
      });
      if (!present && etcd_->put(key_, value_, lease).ok()) {
        reregistrations_.fetch_add(1);
        log(cat("key ", key_, " was gone or changed; put it back"));
      }
    }
  }
}

void CellRegistration::halt() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status CellRegistration::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return ok_status();
    done_ = true;
  }
  halt();
  const int64_t lease = lease_.exchange(0);
  if (lease == 0) return ok_status();
  return etcd_->revoke(lease);
}

void CellRegistration::abandon() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
  }
  halt();
  lease_.store(0);
}

// ---------------------------------------------------------------------------
// CellWatcher

Result<std::unique_ptr<CellWatcher>> CellWatcher::start(std::string_view endpoint, CellWatcherOptions options) {
  if (options.min_backoff.count() < 1) options.min_backoff = std::chrono::milliseconds(1);
  options.max_backoff = std::max(options.max_backoff, options.min_backoff);
  TH_ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> etcd, EtcdClient::create(endpoint, options.etcd));
  std::unique_ptr<CellWatcher> w(new CellWatcher(std::move(etcd), std::move(options)));
  w->thread_ = std::thread([p = w.get()] { p->run(); });
  return w;
}

CellWatcher::CellWatcher(std::unique_ptr<EtcdClient> etcd, CellWatcherOptions options)
    : etcd_(std::move(etcd)), options_(std::move(options)) {}

CellWatcher::~CellWatcher() { stop(); }

void CellWatcher::log(std::string_view line) const { write_log(options_.log, cat("watcher ", options_.prefix, ": ", line)); }

std::vector<DiscoveredCell> CellWatcher::cells() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<DiscoveredCell> out;
  out.reserve(cells_.size());
  for (const auto& entry : cells_) out.push_back(entry.second);
  return out;
}

bool CellWatcher::synced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return synced_;
}

bool CellWatcher::wait_synced(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return synced_; });
}

std::string CellWatcher::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

void CellWatcher::on_change(OnChange callback) {
  std::lock_guard<std::mutex> lock(callback_mu_);
  callback_ = std::move(callback);
  notified_.reset();
  if (synced()) notify_locked();
}

void CellWatcher::notify() {
  std::lock_guard<std::mutex> lock(callback_mu_);
  notify_locked();
}

void CellWatcher::notify_locked() {
  // The set is read under callback_mu_, so calls see sets in the order they were made; a set
  // equal to the one last passed (ids and urls) is not passed again: on_change racing the first
  // sync would otherwise hand the same set twice.
  if (!callback_) return;
  std::vector<DiscoveredCell> now = cells();
  auto same = [](const DiscoveredCell& a, const DiscoveredCell& b) { return a.id == b.id && a.url == b.url; };
  if (notified_ && std::equal(now.begin(), now.end(), notified_->begin(), notified_->end(), same)) return;
  notified_ = now;
  callback_(now);
}

bool CellWatcher::apply_put(std::string_view key, std::string_view value, int64_t mod_revision) {
  if (key.substr(0, options_.prefix.size()) != options_.prefix) return false;
  const std::string id(key.substr(options_.prefix.size()));
  if (!validate_cell_id(id).ok()) return false;  // not a cell's key (e.g. deeper under the prefix)
  std::string url = url_of(value);
  std::lock_guard<std::mutex> lock(mu_);
  if (url.empty()) {
    // Not a registration we can use: as if it were not there.
    return cells_.erase(id) > 0;
  }
  DiscoveredCell cell{id, std::move(url), mod_revision};
  const auto it = cells_.find(id);
  if (it != cells_.end() && it->second.url == cell.url) {
    it->second.mod_revision = mod_revision;
    return false;  // the same cell registered again (a new lease): not a change of the set
  }
  cells_[id] = std::move(cell);
  return true;
}

bool CellWatcher::apply_delete(std::string_view key) {
  if (key.substr(0, options_.prefix.size()) != options_.prefix) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return cells_.erase(std::string(key.substr(options_.prefix.size()))) > 0;
}

bool CellWatcher::sleep_for(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, d, [this] { return stop_.load(); });
  return !stop_.load();
}

void CellWatcher::run() {
  std::chrono::milliseconds backoff = options_.min_backoff;
  bool failing = false;
  while (!stop_.load()) {
    Result<RangeResult> read = etcd_->range_prefix(options_.prefix);
    if (!read.ok()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_error_ = read.message();
      }
      if (!failing) log(cat("cannot read the cells, will keep trying: ", read.message()));
      failing = true;
      if (!sleep_for(backoff)) break;
      backoff = std::min(backoff * 2, options_.max_backoff);
      continue;
    }
    if (failing) log(cat("read ", read->kvs.size(), " cell keys again at revision ", read->revision));
    failing = false;
    bool changed = false;
    bool first = false;
    {
      std::map<std::string, DiscoveredCell> fresh;
      for (const KeyValue& kv : read->kvs) {
        const std::string id = kv.key.substr(options_.prefix.size());
        std::string url = url_of(kv.value);
        if (!validate_cell_id(id).ok() || url.empty()) continue;
        fresh[id] = DiscoveredCell{id, std::move(url), kv.mod_revision};
      }
      std::lock_guard<std::mutex> lock(mu_);
      // A change of the set is a change of ids or urls; revisions alone are not.
      changed = fresh.size() != cells_.size() ||
                !std::equal(fresh.begin(), fresh.end(), cells_.begin(), [](const auto& a, const auto& b) {
                  return a.first == b.first && a.second.url == b.second.url;
                });
      cells_ = std::move(fresh);
      first = !synced_;
      synced_ = true;
      last_error_.clear();
    }
    cv_.notify_all();
    resyncs_.fetch_add(1);
    if (changed || first) notify();

    const Clock::time_point watch_start = Clock::now();
    Status s = etcd_->watch_prefix(
        options_.prefix, read->revision + 1,
        [this](const WatchEvent& e) {
          const bool set_changed = e.type == WatchEvent::Type::kPut ? apply_put(e.key, e.value, e.mod_revision)
                                                                    : apply_delete(e.key);
          if (set_changed) notify();
          return !stop_.load();
        },
        &stop_);
    if (stop_.load()) break;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_error_ = s.ok() ? std::string("watch ended") : s.message();
    }
    log(cat("watch ended, reading again: ", s.ok() ? std::string("no error") : s.message()));
    // A watch that fails at once again and again backs off; one that ran a while starts over.
    if (Clock::now() - watch_start >= std::chrono::seconds(1)) backoff = options_.min_backoff;
    if (!sleep_for(backoff)) break;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

void CellWatcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace th::cluster
