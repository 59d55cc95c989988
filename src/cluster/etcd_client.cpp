#include "cluster/etcd_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/tcp_connect.h"
#include "base/unique_fd.h"
#include "cluster/bounded_json.h"
#include "client/http_response_parser.h"

namespace th::cluster {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// A watch message larger than this is refused (etcd's own default limit on a
// request is 1.5 MiB; a batch of events can hold several values).
constexpr size_t kMaxWatchLine = 64u << 20;

std::string int64_string(int64_t v) { return std::to_string(v); }

Result<json> parse_object(std::string_view body) {
  Result<json> j = parse_json_bounded(body, kEtcdLimits);
  if (!j.ok() || !j->is_object()) return Status::errorf("not a JSON object: ", body.substr(0, 200));
  return j;
}

// Waits up to `ms` for `events` on `fd`: 1 ready, 0 not yet, -1 error (errno).
int poll_fd(int fd, short events, int ms) {
  pollfd p{fd, events, 0};
  const int n = ::poll(&p, 1, ms);
  if (n < 0 && errno == EINTR) return 0;
  return n;
}

bool stopped(const std::atomic<bool>* stop) { return stop != nullptr && stop->load(std::memory_order_relaxed); }

}  // namespace

Result<std::unique_ptr<EtcdClient>> EtcdClient::create(std::string_view endpoint, EtcdClientOptions options) {
  std::string url(endpoint);
  if (client::to_lower_ascii(url.substr(0, 7)) == "etcd://") url = "http://" + url.substr(7);
  Result<client::BaseUrl> base = client::parse_base_url(url);
  if (!base.ok()) return Status::errorf("etcd endpoint ", endpoint, ": ", base.message());
  if (!base->prefix.empty())
    return Status::errorf("etcd endpoint ", endpoint, ": a path is not supported (the gateway is at /v3/)");
  const std::string normalized = "http://" + base->authority;
  if (options.watch_poll.count() < 1) options.watch_poll = std::chrono::milliseconds(1);
  client::HttpClientOptions http;
  http.request_timeout = options.request_timeout;
  http.connect_timeout = options.connect_timeout;
  http.max_idle_connections = 8;
  http.user_agent = "tokenhive-etcd/0.1";
  Result<std::unique_ptr<client::HttpClient>> c = client::HttpClient::create(normalized, http);
  if (!c.ok()) return Status::errorf("etcd endpoint ", endpoint, ": ", c.message());
  return std::unique_ptr<EtcdClient>(new EtcdClient(normalized, *base, options, std::move(c).value()));
}

EtcdClient::EtcdClient(std::string endpoint, client::BaseUrl base, EtcdClientOptions options,
                       std::unique_ptr<client::HttpClient> http)
    : endpoint_(std::move(endpoint)), base_(std::move(base)), options_(options), http_(std::move(http)) {}

EtcdClient::~EtcdClient() = default;

Status EtcdClient::error(std::string_view call, std::string_view what) const {
  return Status::errorf("etcd ", endpoint_, ": ", call, ": ", what);
}

Result<std::string> EtcdClient::call(std::string_view call, const std::string& body) {
  Result<client::Response> r = http_->request("POST", cat("/v3/", call), body);
  if (!r.ok()) return error(call, r.message());
  if (r->status != 200) return error(call, cat(gateway_error_text(r->body), ", HTTP ", r->status));
  return std::move(r->body);
}

Result<int64_t> EtcdClient::grant_lease(std::chrono::seconds ttl) {
  const json req = {{"TTL", int64_string(ttl.count())}};
  TH_ASSIGN_OR_RETURN(std::string body, call("lease/grant", req.dump()));
  Result<json> j = parse_object(body);
  if (!j.ok()) return error("lease/grant", j.message());
  if (const auto e = j->find("error"); e != j->end() && e->is_string() && !e->get_ref<const std::string&>().empty())
    return error("lease/grant", e->get<std::string>());
  Result<int64_t> id = json_int64(*j, "ID");
  if (!id.ok()) return error("lease/grant", id.message());
  if (*id == 0) return error("lease/grant", "no lease ID in the answer");
  return *id;
}

Result<int64_t> EtcdClient::keep_alive_ttl(int64_t lease) {
  const json req = {{"ID", int64_string(lease)}};
  TH_ASSIGN_OR_RETURN(std::string body, call("lease/keepalive", req.dump()));
  // A stream of one message: {"result":{...}} or {"error":{...}}.
  const size_t nl = body.find('\n');
  Result<json> j = parse_object(std::string_view(body).substr(0, nl));
  if (!j.ok()) return error("lease/keepalive", j.message());
  const auto res = j->find("result");
  if (res == j->end() || !res->is_object()) return error("lease/keepalive", gateway_error_text(body));
  Result<int64_t> ttl = json_int64(*res, "TTL");
  if (!ttl.ok()) return error("lease/keepalive", ttl.message());
  return std::max<int64_t>(*ttl, 0);
}

Status EtcdClient::keep_alive(int64_t lease) {
  Result<int64_t> ttl = keep_alive_ttl(lease);
  if (!ttl.ok()) return ttl.status();
  if (*ttl <= 0) return error("lease/keepalive", cat("lease ", lease, " not found (expired or revoked: TTL 0)"));
  return ok_status();
}

Status EtcdClient::revoke(int64_t lease) {
  const json req = {{"ID", int64_string(lease)}};
  Result<std::string> body = call("lease/revoke", req.dump());
  return body.ok() ? ok_status() : body.status();
}

Result<int64_t> EtcdClient::put(std::string_view key, std::string_view value, int64_t lease) {
  json req = {{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease != 0) req["lease"] = int64_string(lease);
  TH_ASSIGN_OR_RETURN(std::string body, call("kv/put", req.dump()));
  Result<json> j = parse_object(body);
  if (!j.ok()) return error("kv/put", j.message());
  const auto h = j->find("header");
  if (h == j->end() || !h->is_object()) return error("kv/put", "no header in the answer");
  Result<int64_t> rev = json_int64(*h, "revision");
  if (!rev.ok()) return error("kv/put", rev.message());
  return *rev;
}

Result<RangeResult> EtcdClient::range_prefix(std::string_view prefix) {
  const json req = {{"key", base64_encode(prefix.empty() ? std::string_view("\0", 1) : prefix)},
                    {"range_end", base64_encode(prefix_range_end(prefix))}};
  TH_ASSIGN_OR_RETURN(std::string body, call("kv/range", req.dump()));
  Result<json> j = parse_object(body);
  if (!j.ok()) return error("kv/range", j.message());
  RangeResult out;
  const auto h = j->find("header");
  if (h == j->end() || !h->is_object()) return error("kv/range", "no header in the answer");
  Result<int64_t> rev = json_int64(*h, "revision");
  if (!rev.ok()) return error("kv/range", rev.message());
  out.revision = *rev;
  if (const auto kvs = j->find("kvs"); kvs != j->end() && !kvs->is_null()) {
    if (!kvs->is_array()) return error("kv/range", "kvs is not an array");
    for (const json& kv : *kvs) {
      if (!kv.is_object()) return error("kv/range", "a kv is not an object");
      KeyValue item;
      for (const char* field : {"key", "value"}) {
        std::string decoded;
        if (const auto it = kv.find(field); it != kv.end() && it->is_string()) {
          Result<std::string> d = base64_decode(it->get_ref<const std::string&>());
          if (!d.ok()) return error("kv/range", cat(field, ": ", d.message()));
          decoded = std::move(d).value();
        }
        (std::string_view(field) == "key" ? item.key : item.value) = std::move(decoded);
      }
      Result<int64_t> cr = json_int64(kv, "create_revision");
      Result<int64_t> mr = json_int64(kv, "mod_revision");
      Result<int64_t> ls = json_int64(kv, "lease");
      if (!cr.ok() || !mr.ok() || !ls.ok())
        return error("kv/range", !cr.ok() ? cr.message() : !mr.ok() ? mr.message() : ls.message());
      item.create_revision = *cr;
      item.mod_revision = *mr;
      item.lease = *ls;
      out.kvs.push_back(std::move(item));
    }
  }
  return out;
}

Status EtcdClient::delete_key(std::string_view key) {
  const json req = {{"key", base64_encode(key)}};
  Result<std::string> body = call("kv/deleterange", req.dump());
  return body.ok() ? ok_status() : body.status();
}

Status EtcdClient::watch_prefix(std::string_view prefix, int64_t start_revision,
                                std::function<bool(const WatchEvent&)> on_event, const std::atomic<bool>* stop) {
  if (!on_event) return error("watch", "no on_event callback");
  json create = {{"key", base64_encode(prefix.empty() ? std::string_view("\0", 1) : prefix)},
                 {"range_end", base64_encode(prefix_range_end(prefix))}};
  if (start_revision > 0) create["start_revision"] = int64_string(start_revision);
  const std::string body = json{{"create_request", std::move(create)}}.dump();
  const std::string wire = cat("POST /v3/watch HTTP/1.1\r\nHost: ", base_.authority,
                               "\r\nUser-Agent: tokenhive-etcd/0.1\r\nContent-Type: application/json\r\nContent-Length: ",
                               body.size(), "\r\n\r\n", body);
  const int slice = static_cast<int>(options_.watch_poll.count());

  Result<UniqueFd> conn = connect_tcp(base_.host, static_cast<uint16_t>(base_.port),
                                     {std::chrono::steady_clock::now() + options_.connect_timeout, stop});
  if (stopped(stop)) return ok_status();
  if (!conn.ok()) return error("watch", conn.message());
  const int fd = conn->get();

  const Clock::time_point send_deadline = Clock::now() + options_.request_timeout;
  for (size_t off = 0; off < wire.size();) {
    const ssize_t n = ::send(fd, wire.data() + off, wire.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (stopped(stop)) return ok_status();
      if (Clock::now() > send_deadline) return error("watch", "timed out sending the request");
      poll_fd(fd, POLLOUT, slice);
    } else {
      return error("watch", cat("send: ", std::strerror(errno)));
    }
  }

  client::HttpResponseParser parser;
  parser.reset("POST");
  std::string piece, pending;  // body bytes; the unfinished line
  std::string error_body;      // a non-2xx answer's body
  bool created = false;
  char buf[32 * 1024];
  while (true) {
    if (stopped(stop)) return ok_status();
    const int ready = poll_fd(fd, POLLIN, slice);
    if (ready == 0) continue;
    if (ready < 0) return error("watch", cat("poll: ", std::strerror(errno)));
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return error("watch", cat("recv: ", std::strerror(errno)));
    }
    if (n == 0) {
      if (parser.head_done() && (parser.status() < 200 || parser.status() >= 300))
        return error("watch", cat(gateway_error_text(error_body), ", HTTP ", parser.status()));
      return error("watch", created ? "etcd closed the watch stream" : "connection closed before the watch was created");
    }
    std::string_view data(buf, static_cast<size_t>(n));
    while (!data.empty() && !parser.done()) {
      Result<size_t> used = parser.feed(data, &piece);
      if (!used.ok()) return error("watch", cat("bad response: ", used.message()));
      data.remove_prefix(*used);
      if (piece.empty()) continue;
      if (parser.status() < 200 || parser.status() >= 300) {
        if (error_body.size() < 64 * 1024) error_body += piece;
        piece.clear();
        continue;
      }
      pending += piece;
      piece.clear();
      size_t start = 0;
      for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
        std::string_view line(pending.data() + start, nl - start);
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
        if (line.empty()) continue;
        Result<WatchMessage> m = parse_watch_message(line);
        if (!m.ok()) return error("watch", m.message());
        if (m->created) created = true;
        if (m->canceled) {
          if (m->compact_revision > 0)
            return error("watch", cat("start revision ", start_revision, " compacted (compact revision ",
                                      m->compact_revision, "): re-read and watch from there"));
          return error("watch", cat("canceled by etcd", m->cancel_reason.empty() ? "" : ": ", m->cancel_reason));
        }
        for (const WatchEvent& e : m->events) {
          if (!on_event(e)) return ok_status();
          if (stopped(stop)) return ok_status();
        }
      }
      pending.erase(0, start);
      if (pending.size() > kMaxWatchLine) return error("watch", cat("a watch message over ", kMaxWatchLine, " bytes"));
    }
    if (parser.done()) {
      if (parser.status() < 200 || parser.status() >= 300)
        return error("watch", cat(gateway_error_text(error_body), ", HTTP ", parser.status()));
      return error("watch", "etcd ended the watch stream");
    }
  }
}

}  // namespace th::cluster
