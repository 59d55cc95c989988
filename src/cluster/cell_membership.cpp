#include "cluster/cell_membership.h"

#include <pthread.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "client/http_client.h"
#include "cluster/bounded_json.h"
#include "cluster/cell_registry.h"

namespace th::cluster {

namespace {

constexpr std::chrono::seconds kRejoinEvery{5};

std::string cell_id_of(const std::string& url) {
  // "http://127.0.0.1:8080" -> "127.0.0.1:8080": a key name etcd and people can read.
  const size_t p = url.find("://");
  return p == std::string::npos ? url : url.substr(p + 3);
}

std::unique_ptr<client::HttpClient> router_client(const std::string& url) {
  client::HttpClientOptions o;
  o.connect_timeout = std::chrono::milliseconds(1000);
  o.request_timeout = std::chrono::milliseconds(2000);
  o.retry.max_attempts = 1;
  Result<std::unique_ptr<client::HttpClient>> c = client::HttpClient::create(url, o);
  return c.ok() ? std::move(*c) : nullptr;
}

std::vector<client::Header> admin_headers(const std::string& token) {
  if (token.empty()) return {};
  return {{"Authorization", "Bearer " + token}};
}

}  // namespace

CellMembership::CellMembership(CellMembershipOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<CellMembership>> CellMembership::start(CellMembershipOptions options) {
  if (options.advertise.empty()) return Status::error("a cell that joins needs the URL routers reach it at (--advertise)");
  if (!options.join.empty()) TH_RETURN_IF_ERROR(client::parse_base_url(options.join).status());
  std::unique_ptr<CellMembership> m(new CellMembership(std::move(options)));
  if (!m->options_.discovery.empty()) {
    TH_ASSIGN_OR_RETURN(m->registration_, CellRegistration::start(m->options_.discovery, cell_id_of(m->options_.advertise),
                                                                  m->options_.advertise));
    m->joined_.store(true);
  }
  if (!m->options_.join.empty()) {
    CellMembership* self = m.get();
    m->thread_ = std::thread([self] {
      pthread_setname_np(pthread_self(), "th-join");
      self->join_loop();
    });
  }
  return m;
}

CellMembership::~CellMembership() { leave(); }

void CellMembership::join_loop() {
  std::unique_ptr<client::HttpClient> router = router_client(options_.join);
  if (!router) return;
  const std::vector<client::Header> headers = admin_headers(options_.admin_token);
  const std::string body = nlohmann::json{{"url", options_.advertise}}.dump();
  std::chrono::milliseconds delay(50);
  for (;;) {
    Result<client::Response> r = router->request("POST", "/admin/cells", body, headers);
    if (r.ok() && r->status == 200) {
      Result<nlohmann::json> parsed = parse_json_bounded(r->body, kControlLimits);
      nlohmann::json j = parsed.ok() ? std::move(*parsed) : nlohmann::json();
      const bool via_etcd = j.is_object() && j.contains("discovery") && j["discovery"].is_string();
      if (!via_etcd) {
        if (!joined_.exchange(true))
          std::fprintf(stderr, "tokenhive serve: joined the router at %s as %s\n", options_.join.c_str(), options_.advertise.c_str());
        // Joining again is a no-op for a router that has us, and brings back one that
        // restarted and forgot us.
        std::unique_lock<std::mutex> l(mu_);
        if (cv_.wait_for(l, kRejoinEvery, [&] { return stopping_; })) return;
        delay = std::chrono::milliseconds(50);
        continue;
      }
      // The router finds its cells on etcd: register there, under our own lease.
      const std::string endpoint = j["discovery"].get<std::string>();
      Result<std::unique_ptr<CellRegistration>> reg = CellRegistration::start(endpoint, cell_id_of(options_.advertise), options_.advertise);
      if (reg.ok()) {
        std::lock_guard<std::mutex> l(mu_);
        if (stopping_) return;
        registration_ = std::move(*reg);
        joined_.store(true);
        std::fprintf(stderr, "tokenhive serve: registered on %s (through the router at %s) as %s\n", endpoint.c_str(),
                     options_.join.c_str(), options_.advertise.c_str());
        return;
      }
      std::fprintf(stderr, "tokenhive serve: join: %s\n", reg.message().c_str());
    } else if (r.ok() && (r->status == 400 || r->status == 401)) {
      std::fprintf(stderr, "tokenhive serve: the router at %s refused the join: %s\n", options_.join.c_str(), r->body.c_str());
      return;
    }
    std::unique_lock<std::mutex> l(mu_);
    if (cv_.wait_for(l, delay, [&] { return stopping_; })) return;
    delay = std::min(delay * 2, std::chrono::milliseconds(2000));
  }
}

void CellMembership::leave() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (registration_) {
    (void)registration_->stop();  // revokes the lease: watchers drop the cell at once
  } else if (joined_.load() && !options_.join.empty()) {
    if (std::unique_ptr<client::HttpClient> router = router_client(options_.join)) {
      (void)router->request("POST", "/admin/cells/leave", nlohmann::json{{"url", options_.advertise}}.dump(),
                            admin_headers(options_.admin_token));
    }
  }
  joined_.store(false);
}

}  // namespace th::cluster
