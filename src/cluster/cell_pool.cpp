#include "cluster/cell_pool.h"

#include <pthread.h>

#include <algorithm>

#include "cluster/bounded_json.h"
#include "cluster/cell_load.h"

namespace th::cluster {

namespace {

using json = nlohmann::json;

const char* source_name(CellSource s) {
  switch (s) {
    case CellSource::kFlag: return "flag";
    case CellSource::kJoin: return "join";
    case CellSource::kDiscovery: return "discovery";
  }
  return "?";
}

}  // namespace

Cell::Cell(std::string url, CellSource source, std::unique_ptr<client::HttpClient> proxy,
           std::unique_ptr<client::HttpClient> heartbeat, const CellPoolOptions& options)
    : url_(std::move(url)),
      source_(source),
      proxy_(std::move(proxy)),
      heartbeat_(std::move(heartbeat)),
      options_(options),
      detector_(options.detector) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "th-heartbeat");
    heartbeat_loop();
  });
}

Cell::~Cell() { stop(); }

void Cell::stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  stop_flag_.store(true);
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void Cell::heartbeat_loop() {
  for (;;) {
    const Clock::time_point started = Clock::now();
    Result<client::Response> r = heartbeat_->request("GET", "/admin/load", {}, {}, &stop_flag_);
    const Clock::time_point now = Clock::now();
    bool died = false, revived = false;
    std::chrono::nanoseconds latency{0};
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stopping_) return;
      const CellHealth before = detector_.health();
      // A heartbeat that is not a JSON object (too deep, too big, not JSON) is a failed
      // one: such a cell is broken or is not a cell.
      Result<CellLoad> load = r.ok() && r->status == 200 ? parse_cell_load(r->body)
                                                         : Result<CellLoad>(Status::error("no heartbeat"));
      if (load.ok()) {
        load_ = *load;
        detector_.on_success(now);
      } else if (r.ok() && r->status == 503) {
        // Loading or shutting down: it answers, so it is alive, but takes no work.
        load_.draining = true;
        detector_.on_success(now);
      } else {
        detector_.on_failure(now);
      }
      const CellHealth after = detector_.check(now);
      died = after == CellHealth::kDead && before != CellHealth::kDead;
      revived = after == CellHealth::kAlive && before == CellHealth::kDead;
      if (died) {
        if (auto d = detector_.detection_latency()) latency = *d;
        for (std::atomic<bool>* f : running_) f->store(true);
      }
    }
    if (died && options_.on_death) options_.on_death(url_, latency);
    if (revived && options_.on_alive) options_.on_alive(url_);
    std::unique_lock<std::mutex> l(mu_);
    // The next beat a full interval after this one began; a slow one (a hung cell) is
    // re-checked against the detector's timeout at once.
    cv_.wait_until(l, std::max(started + options_.heartbeat_interval, now), [&] { return stopping_; });
    if (stopping_) return;
  }
}

bool Cell::eligible_locked() const { return detector_.health() == CellHealth::kAlive && !load_.draining && !stopping_; }

bool Cell::eligible() const {
  std::lock_guard<std::mutex> l(mu_);
  return eligible_locked();
}

CellHealth Cell::health() const {
  std::lock_guard<std::mutex> l(mu_);
  return detector_.health();
}

CellView Cell::view() const {
  std::lock_guard<std::mutex> l(mu_);
  CellView v;
  v.id = url_;
  v.eligible = eligible_locked();
  v.load = load_;
  v.outstanding_tokens = outstanding_;
  return v;
}

json Cell::describe() const {
  std::lock_guard<std::mutex> l(mu_);
  int64_t outstanding = 0;
  for (const auto& entry : outstanding_) outstanding += entry.second;
  json j = {{"url", url_},
            {"source", source_name(source_)},
            {"state", detector_.health() == CellHealth::kAlive && load_.draining ? "draining" : std::string(cell_health_name(detector_.health()))},
            {"running", load_.running},
            {"waiting", load_.waiting},
            {"kv_free_blocks", load_.kv_free_blocks},
            {"kv_total_blocks", load_.kv_total_blocks},
            {"tokens_per_second", load_.tokens_per_second},
            {"outstanding_tokens", outstanding},
            {"requests_in_flight", static_cast<int64_t>(running_.size())},
            {"requests", requests_},
            {"invalid_answers", invalid_answers_.load(std::memory_order_relaxed)},
            {"deaths", detector_.deaths()}};
  if (auto d = detector_.detection_latency()) j["last_detection_ms"] = std::chrono::duration<double, std::milli>(*d).count();
  // The cluster view shows it: a dead cell's age grows while its state says why.
  if (auto last = detector_.last_success())
    j["heartbeat_age_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - *last).count();
  return j;
}

CellWork::CellWork(std::shared_ptr<Cell> cell, int32_t priority, int64_t tokens, std::atomic<bool>* cancel)
    : cell_(std::move(cell)), priority_(priority), tokens_(tokens), cancel_(cancel) {
  std::lock_guard<std::mutex> l(cell_->mu_);
  cell_->outstanding_[priority_] += tokens_;
  cell_->running_.insert(cancel_);
  ++cell_->requests_;
  if (cell_->detector_.health() == CellHealth::kDead) cancel_->store(true);
}

CellWork::~CellWork() {
  std::lock_guard<std::mutex> l(cell_->mu_);
  if ((cell_->outstanding_[priority_] -= tokens_) <= 0) cell_->outstanding_.erase(priority_);
  cell_->running_.erase(cancel_);
}

CellPool::CellPool(CellPoolOptions options) : options_(std::move(options)) {}

CellPool::~CellPool() {
  std::vector<std::shared_ptr<Cell>> cells;
  {
    std::lock_guard<std::mutex> l(mu_);
    cells.swap(cells_);
  }
  for (auto& c : cells) c->stop();
}

Status CellPool::add(const std::string& url, CellSource source) {
  std::string u = url;
  while (!u.empty() && u.back() == '/') u.pop_back();
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& c : cells_)
      if (c->url() == u) return ok_status();
  }
  client::HttpClientOptions proxy_options;
  proxy_options.connect_timeout = std::chrono::milliseconds(1000);
  proxy_options.retry.max_attempts = 1;  // the router retries, on another cell
  proxy_options.user_agent = "tokenhive-router";
  // What the router buffers of one answer (a whole non-streamed one, or an error body):
  // the largest the router parses (bounded_json.h); past it the call fails and the cell
  // has failed the request.
  proxy_options.max_response_bytes = kCellAnswerLimits.max_bytes;
  TH_ASSIGN_OR_RETURN(auto proxy, client::HttpClient::create(u, proxy_options));
  if (!proxy->base_url().prefix.empty()) return Status::errorf("cell URL ", url, ": give http://host:port, without a path");
  client::HttpClientOptions beat_options;
  beat_options.connect_timeout = options_.heartbeat_timeout;
  beat_options.request_timeout = options_.heartbeat_timeout;
  beat_options.retry.max_attempts = 1;
  beat_options.max_idle_connections = 2;
  beat_options.user_agent = "tokenhive-router-heartbeat";
  beat_options.max_response_bytes = kControlLimits.max_bytes;
  TH_ASSIGN_OR_RETURN(auto beat, client::HttpClient::create(u, beat_options));
  auto cell = std::make_shared<Cell>(u, source, std::move(proxy), std::move(beat), options_);
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& c : cells_)
    if (c->url() == u) return ok_status();  // added meanwhile; `cell` stops as it goes
  cells_.push_back(std::move(cell));
  return ok_status();
}

void CellPool::remove(const std::string& url) {
  std::shared_ptr<Cell> gone;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = std::find_if(cells_.begin(), cells_.end(), [&](const auto& c) { return c->url() == url; });
    if (it == cells_.end()) return;
    gone = *it;
    cells_.erase(it);
  }
  gone->stop();
}

void CellPool::set_discovered(const std::vector<std::string>& urls) {
  std::vector<std::string> stale;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& c : cells_)
      if (c->source() == CellSource::kDiscovery && std::find(urls.begin(), urls.end(), c->url()) == urls.end())
        stale.push_back(c->url());
  }
  for (const std::string& u : stale) remove(u);
  for (const std::string& u : urls) (void)add(u, CellSource::kDiscovery);
}

std::shared_ptr<Cell> CellPool::pick(const RoutingPolicy& policy, const RouteRequest& request,
                                     const std::set<std::string>& excluded) const {
  std::vector<std::shared_ptr<Cell>> cells = this->cells();
  std::vector<CellView> views;
  views.reserve(cells.size());
  for (const auto& c : cells) {
    views.push_back(c->view());
    if (excluded.count(c->url())) views.back().eligible = false;
  }
  std::optional<size_t> i = policy.pick(request, views);
  return i ? cells[*i] : nullptr;
}

std::shared_ptr<Cell> CellPool::any_eligible() const {
  for (const auto& c : cells())
    if (c->eligible()) return c;
  return nullptr;
}

std::vector<std::shared_ptr<Cell>> CellPool::cells() const {
  std::lock_guard<std::mutex> l(mu_);
  return cells_;
}

size_t CellPool::eligible_count() const {
  size_t n = 0;
  for (const auto& c : cells()) n += c->eligible() ? 1 : 0;
  return n;
}

}  // namespace th::cluster
