#include "cluster/upstream_loop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "base/tcp_connect.h"
#include "base/unique_fd.h"
#include "client/http_response_parser.h"

namespace th::cluster {

namespace {

using Clock = std::chrono::steady_clock;

// Idle connections kept per target: enough for a burst of short requests to reuse, few
// enough that a router whose 5,000 streams just ended holds no 5,000 sockets for long.
constexpr size_t kMaxIdlePerTarget = 1024;
constexpr auto kMaxIdleTime = std::chrono::seconds(30);
// How often cancel flags and deadlines are looked at while calls are in flight: a cell
// declared dead wakes its requests within this (detection itself takes 50-300 ms).
constexpr auto kTick = std::chrono::milliseconds(10);

struct Conn {
  UniqueFd fd;
  Clock::time_point idle_since;
};

enum class Phase : uint8_t { kConnecting, kSending, kReceiving };

struct Exchange {
  uint64_t id = 0;
  UpstreamCall call;
  UniqueFd fd;
  Phase phase = Phase::kConnecting;
  bool reused = false;      // the connection came from the idle pool
  bool any_byte = false;    // a byte of the response came
  size_t sent = 0;
  client::HttpResponseParser parser;
  UpstreamResult result;
  Clock::time_point connect_until{};
};

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

std::optional<std::string_view> UpstreamResult::header(std::string_view name) const {
  const std::string lower = client::to_lower_ascii(name);
  for (const client::Header& h : headers)
    if (h.name == lower) return std::string_view(h.value);
  return std::nullopt;
}

std::string upstream_wire(const client::BaseUrl& target, std::string_view method, std::string_view path,
                          std::string_view body, const std::vector<client::Header>& headers) {
  std::string wire;
  wire.reserve(200 + body.size());
  wire.append(method).append(" ").append(target.prefix).append(path).append(" HTTP/1.1\r\nHost: ").append(target.authority);
  wire += "\r\nUser-Agent: tokenhive-router\r\n";
  for (const client::Header& h : headers) wire.append(h.name).append(": ").append(h.value).append("\r\n");
  if (!body.empty()) wire += "Content-Type: application/json\r\n";
  if (!body.empty() || method == "POST") wire.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  wire += "\r\n";
  wire.append(body);
  return wire;
}

struct UpstreamLoop::Impl {
  UniqueFd epoll, wake;
  std::thread thread;

  std::mutex mu;  // guards the inbox
  std::vector<UpstreamCall> incoming;
  std::vector<std::pair<Clock::time_point, std::function<void()>>> incoming_tasks;
  bool stopping = false;

  // Loop thread only.
  std::unordered_map<uint64_t, std::unique_ptr<Exchange>> exchanges;
  std::map<std::string, std::deque<Conn>> idle_conns;  // by authority, most recent last
  std::unordered_map<std::string, sockaddr_storage> addresses;  // resolved once per authority
  std::unordered_map<std::string, socklen_t> address_lengths;
  std::multimap<Clock::time_point, std::function<void()>> timers;
  uint64_t next_id = 1;
  std::atomic<size_t> active_count{0}, idle_count{0};

  void run();
  void take_inbox(std::vector<UpstreamCall>& calls);
  void begin(UpstreamCall call);
  void start_connect(Exchange& x);
  void on_ready(Exchange& x, uint32_t events);
  void send_some(Exchange& x);
  void receive(Exchange& x);
  void finish(Exchange& x, Status error);
  void finish_ok(Exchange& x, bool reusable);
  void watch(Exchange& x, uint32_t events, bool add);
  void tick();
  void drop_stale_idle();
  Result<int> open_socket(const client::BaseUrl& target);
  void wake_up() {
    const uint64_t one = 1;
    (void)!::write(wake.get(), &one, sizeof one);
  }
};

Result<std::unique_ptr<UpstreamLoop>> UpstreamLoop::create() {
  std::unique_ptr<UpstreamLoop> loop(new UpstreamLoop());
  loop->impl_ = std::make_unique<Impl>();
  Impl& im = *loop->impl_;
  im.epoll.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (im.epoll.get() < 0) return Status::errorf("epoll_create1: ", errno_text(errno));
  im.wake.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (im.wake.get() < 0) return Status::errorf("eventfd: ", errno_text(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  if (::epoll_ctl(im.epoll.get(), EPOLL_CTL_ADD, im.wake.get(), &ev) != 0)
    return Status::errorf("epoll_ctl: ", errno_text(errno));
  im.thread = std::thread([&im] {
    pthread_setname_np(pthread_self(), "th-upstream");
    im.run();
  });
  return loop;
}

UpstreamLoop::~UpstreamLoop() { stop(); }

void UpstreamLoop::submit(UpstreamCall call) {
  {
    std::lock_guard<std::mutex> l(impl_->mu);
    if (!impl_->stopping) {
      impl_->incoming.push_back(std::move(call));
      call.on_done = nullptr;
    }
  }
  if (call.on_done) {  // the loop has stopped: it ends here, on the caller's thread
    UpstreamResult r;
    r.error = Status::error("the router is stopping");
    call.on_done(std::move(r));
    return;
  }
  impl_->wake_up();
}

void UpstreamLoop::post_after(std::chrono::milliseconds delay, std::function<void()> task) {
  {
    std::lock_guard<std::mutex> l(impl_->mu);
    if (impl_->stopping) return;
    impl_->incoming_tasks.emplace_back(Clock::now() + delay, std::move(task));
  }
  impl_->wake_up();
}

void UpstreamLoop::stop() {
  if (!impl_) return;
  {
    std::lock_guard<std::mutex> l(impl_->mu);
    if (impl_->stopping && !impl_->thread.joinable()) return;
    impl_->stopping = true;
  }
  impl_->wake_up();
  if (impl_->thread.joinable()) impl_->thread.join();
}

size_t UpstreamLoop::active() const { return impl_->active_count.load(); }
size_t UpstreamLoop::idle() const { return impl_->idle_count.load(); }

void UpstreamLoop::Impl::run() {
  std::vector<epoll_event> events(256);
  std::vector<UpstreamCall> calls;
  Clock::time_point last_tick = Clock::now();
  for (;;) {
    take_inbox(calls);
    bool stop_now;
    {
      std::lock_guard<std::mutex> l(mu);
      stop_now = stopping;
    }
    if (stop_now) break;
    for (UpstreamCall& c : calls) begin(std::move(c));
    calls.clear();
    // Timers due now run before the wait; a timer may submit (into `incoming`, taken next turn).
    const Clock::time_point now = Clock::now();
    while (!timers.empty() && timers.begin()->first <= now) {
      std::function<void()> f = std::move(timers.begin()->second);
      timers.erase(timers.begin());
      f();
    }
    int timeout = exchanges.empty() ? -1 : static_cast<int>(kTick.count());
    if (!timers.empty()) {
      const auto until = std::chrono::ceil<std::chrono::milliseconds>(timers.begin()->first - Clock::now()).count();
      timeout = timeout < 0 ? static_cast<int>(std::max<int64_t>(until, 0)) : std::min<int>(timeout, static_cast<int>(std::max<int64_t>(until, 0)));
    }
    if (idle_count.load() > 0 && timeout < 0) timeout = 1000;
    {
      std::lock_guard<std::mutex> l(mu);
      if (!incoming.empty() || !incoming_tasks.empty() || stopping) timeout = 0;
    }
    const int n = ::epoll_wait(epoll.get(), events.data(), static_cast<int>(events.size()), timeout);
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[static_cast<size_t>(i)].data.u64;
      if (id == 0) {
        uint64_t v;
        (void)!::read(wake.get(), &v, sizeof v);
        continue;
      }
      auto it = exchanges.find(id);
      if (it != exchanges.end()) on_ready(*it->second, events[static_cast<size_t>(i)].events);
    }
    if (Clock::now() - last_tick >= kTick) {
      last_tick = Clock::now();
      tick();
    }
  }
  // Stopping: every call in flight ends now, with an error its owner can act on.
  std::vector<uint64_t> ids;
  for (const auto& [id, x] : exchanges) ids.push_back(id);
  for (uint64_t id : ids) {
    auto it = exchanges.find(id);
    if (it != exchanges.end()) finish(*it->second, Status::error("the router is stopping"));
  }
  take_inbox(calls);
  for (UpstreamCall& c : calls) {
    UpstreamResult r;
    r.error = Status::error("the router is stopping");
    if (c.on_done) c.on_done(std::move(r));
  }
  timers.clear();
  idle_conns.clear();
}

void UpstreamLoop::Impl::take_inbox(std::vector<UpstreamCall>& calls) {
  std::vector<std::pair<Clock::time_point, std::function<void()>>> tasks;
  {
    std::lock_guard<std::mutex> l(mu);
    for (UpstreamCall& c : incoming) calls.push_back(std::move(c));
    incoming.clear();
    tasks.swap(incoming_tasks);
  }
  for (auto& [at, f] : tasks) timers.emplace(at, std::move(f));
}

Result<int> UpstreamLoop::Impl::open_socket(const client::BaseUrl& target) {
  auto it = addresses.find(target.authority);
  if (it == addresses.end()) {
    // Resolved once per cell: a cell's URL names a numeric address or a name that stays put
    // for the cell's life (a lookup on the loop thread would block every stream).
    TH_ASSIGN_OR_RETURN(AddrInfoList list, resolve_tcp(target.host, static_cast<uint16_t>(target.port), false));
    sockaddr_storage ss{};
    std::memcpy(&ss, list->ai_addr, list->ai_addrlen);
    it = addresses.emplace(target.authority, ss).first;
    address_lengths[target.authority] = list->ai_addrlen;
  }
  const int fd = ::socket(it->second.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::errorf("socket: ", errno_text(errno));
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&it->second), address_lengths[target.authority]) != 0 &&
      errno != EINPROGRESS) {
    const int err = errno;
    ::close(fd);
    return Status::errorf("connect to ", target.authority, ": ", errno_text(err));
  }
  return fd;
}

void UpstreamLoop::Impl::begin(UpstreamCall call) {
  auto x = std::make_unique<Exchange>();
  x->id = ++next_id;
  x->call = std::move(call);
  x->parser.reset(x->call.head ? "HEAD" : "POST");
  Exchange& ref = *x;
  exchanges.emplace(x->id, std::move(x));
  active_count.store(exchanges.size());
  // The most recent idle connection to the target that the cell has not closed.
  auto pool = idle_conns.find(ref.call.target.authority);
  while (pool != idle_conns.end() && !pool->second.empty()) {
    Conn c = std::move(pool->second.back());
    pool->second.pop_back();
    idle_count.fetch_sub(1);
    char b;
    const ssize_t n = ::recv(c.fd.get(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && Clock::now() - c.idle_since < kMaxIdleTime) {
      ref.fd = std::move(c.fd);
      ref.reused = true;
      ref.phase = Phase::kSending;
      watch(ref, EPOLLOUT, true);
      send_some(ref);
      return;
    }
  }
  start_connect(ref);
}

void UpstreamLoop::Impl::start_connect(Exchange& x) {
  x.reused = false;
  x.phase = Phase::kConnecting;
  x.connect_until = Clock::now() + x.call.connect_timeout;
  Result<int> fd = open_socket(x.call.target);
  if (!fd.ok()) {
    finish(x, fd.status());
    return;
  }
  x.fd.reset(*fd);
  watch(x, EPOLLOUT, true);
}

void UpstreamLoop::Impl::watch(Exchange& x, uint32_t events, bool add) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = x.id;
  ::epoll_ctl(epoll.get(), add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, x.fd.get(), &ev);
}

void UpstreamLoop::Impl::on_ready(Exchange& x, uint32_t events) {
  if (x.phase == Phase::kConnecting) {
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(x.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      finish(x, Status::errorf("connect to ", x.call.target.authority, ": ", errno_text(err)));
      return;
    }
    x.phase = Phase::kSending;
  }
  if (x.phase == Phase::kSending) {
    send_some(x);
    return;
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) receive(x);
}

void UpstreamLoop::Impl::send_some(Exchange& x) {
  const std::string& w = x.call.wire;
  while (x.sent < w.size()) {
    const ssize_t n = ::send(x.fd.get(), w.data() + x.sent, w.size() - x.sent, MSG_NOSIGNAL);
    if (n > 0) {
      x.sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // EPOLLOUT again
    const int err = errno;
    if (x.reused) {  // the cell closed the idle connection as we sent: never seen, a new one
      x.fd.reset();
      x.sent = 0;
      start_connect(x);
      return;
    }
    finish(x, Status::errorf("send: ", errno_text(err)));
    return;
  }
  x.phase = Phase::kReceiving;
  watch(x, EPOLLIN | EPOLLRDHUP, false);
}

void UpstreamLoop::Impl::receive(Exchange& x) {
  char buf[16 * 1024];
  std::string piece;
  for (int reads = 0; reads < 8; ++reads) {  // then the other connections get their turn
    const ssize_t n = ::recv(x.fd.get(), buf, sizeof buf, 0);
    if (n == 0) {
      if (!x.any_byte) {
        if (x.reused) {
          x.fd.reset();
          x.sent = 0;
          start_connect(x);
          return;
        }
        finish(x, Status::error("connection closed before a response"));
        return;
      }
      if (Status s = x.parser.finish_at_eof(); !s.ok()) {
        finish(x, s);
        return;
      }
      finish_ok(x, false);
      return;
    }
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (!x.any_byte && x.reused) {
        x.fd.reset();
        x.sent = 0;
        start_connect(x);
        return;
      }
      finish(x, Status::errorf("recv: ", errno_text(err)));
      return;
    }
    x.any_byte = true;
    std::string_view data(buf, static_cast<size_t>(n));
    while (!data.empty() && !x.parser.done()) {
      Result<size_t> used = x.parser.feed(data, &piece);
      if (!used.ok()) {
        finish(x, Status::errorf("bad response: ", used.message()));
        return;
      }
      data.remove_prefix(*used);
      if (piece.empty()) continue;
      const int status = x.parser.status();
      if (x.call.on_body && status >= 200 && status < 300) {
        x.result.delivered = true;
        if (!x.call.on_body(piece)) {
          x.result.stopped = true;
          finish_ok(x, false);
          return;
        }
      } else {
        x.result.body += piece;
        if (x.result.body.size() > x.call.max_body_bytes) {
          finish(x, Status::errorf("response body over ", x.call.max_body_bytes, " bytes"));
          return;
        }
      }
      piece.clear();
    }
    if (x.parser.done()) {
      finish_ok(x, x.parser.keep_alive() && data.empty());
      return;
    }
  }
}

void UpstreamLoop::Impl::finish_ok(Exchange& x, bool reusable) {
  x.result.status = x.parser.status();
  x.result.headers = x.parser.headers();
  if (reusable) {
    ::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, x.fd.get(), nullptr);
    std::deque<Conn>& pool = idle_conns[x.call.target.authority];
    pool.push_back(Conn{std::move(x.fd), Clock::now()});
    idle_count.fetch_add(1);
    if (pool.size() > kMaxIdlePerTarget) {
      pool.pop_front();
      idle_count.fetch_sub(1);
    }
  }
  finish(x, ok_status());
}

void UpstreamLoop::Impl::finish(Exchange& x, Status error) {
  std::unique_ptr<Exchange> owned;
  auto it = exchanges.find(x.id);
  if (it == exchanges.end()) return;
  owned = std::move(it->second);
  exchanges.erase(it);
  active_count.store(exchanges.size());
  if (owned->fd.get() >= 0) ::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, owned->fd.get(), nullptr);
  owned->fd.reset();
  owned->result.error = std::move(error);
  if (owned->call.on_done) owned->call.on_done(std::move(owned->result));
}

void UpstreamLoop::Impl::tick() {
  const Clock::time_point now = Clock::now();
  std::vector<std::pair<uint64_t, Status>> ended;
  for (const auto& [id, x] : exchanges) {
    if ((x->call.cancel && x->call.cancel->load(std::memory_order_relaxed)) ||
        (x->call.also_cancel && x->call.also_cancel->load(std::memory_order_relaxed)))
      ended.emplace_back(id, Status::error("cancelled"));
    else if (now >= x->call.deadline) ended.emplace_back(id, Status::error("no complete response within the request timeout"));
    else if (x->phase == Phase::kConnecting && now >= x->connect_until)
      ended.emplace_back(id, Status::errorf("connect to ", x->call.target.authority, ": timed out"));
  }
  for (auto& [id, why] : ended) {
    auto it = exchanges.find(id);
    if (it != exchanges.end()) finish(*it->second, std::move(why));
  }
  drop_stale_idle();
}

void UpstreamLoop::Impl::drop_stale_idle() {
  const Clock::time_point now = Clock::now();
  for (auto it = idle_conns.begin(); it != idle_conns.end();) {
    std::deque<Conn>& pool = it->second;
    while (!pool.empty() && now - pool.front().idle_since >= kMaxIdleTime) {
      pool.pop_front();
      idle_count.fetch_sub(1);
    }
    it = pool.empty() ? idle_conns.erase(it) : std::next(it);
  }
}

}  // namespace th::cluster
