#include "client/failover_client.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <optional>
#include <thread>

#include "client/stream_resume.h"

namespace th::client {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// An endpoint answering this is failing (or a proxy in front of it says so); 429 is busy, not failing.
bool is_failing_status(int status) { return status == 502 || status == 503 || status == 504; }

std::string tries_text(int n) { return n == 1 ? std::string("1 try") : cat(n, " tries"); }

std::string first_line(const std::string& body) { return body.substr(0, std::min<size_t>(body.find('\n'), 200)); }

bool is_2xx(int status) { return status >= 200 && status <= 299; }

// The end of a stream whose every choice finished but whose endpoints did not all send their
// usage chunk and [DONE]: the usage chunk made from what the caller has (if asked for), [DONE].
Response finish_stream(const StreamRequest& q, const StreamProgress& p, const SseReader::OnEvent& on_event, int tries) {
  if (!p.done) {
    if (std::optional<std::string> usage = final_usage_chunk(q, p)) {
      SseEvent u;
      u.data = std::move(*usage);
      if (on_event(u)) {
        SseEvent done;
        done.data = "[DONE]";
        on_event(done);
      }
    } else {
      SseEvent done;
      done.data = "[DONE]";
      on_event(done);
    }
  }
  Response ok;
  ok.status = 200;
  ok.attempts = tries;
  return ok;
}

// Choices resumed at once after a break: each is one blocking stream on its own thread.
// The server's own limit on n is 16 (server/api_request.h, max_n); a larger stream's
// choices wait for a thread.
constexpr size_t kMaxLegThreads = 16;

}  // namespace

Result<std::vector<std::string>> parse_endpoint_list(std::string_view list) {
  std::vector<std::string> out;
  size_t entry = 0;
  for (size_t start = 0; start <= list.size(); ++entry) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view url = trim(list.substr(start, comma - start));
    start = comma + 1;
    if (url.empty()) return Status::errorf("endpoint list '", list, "': entry ", entry + 1, " is empty");
    Result<BaseUrl> parsed = parse_base_url(url);
    if (!parsed.ok()) return Status::errorf("endpoint list '", list, "': entry ", entry + 1, ": ", parsed.message());
    if (std::find(out.begin(), out.end(), url) != out.end())
      return Status::errorf("endpoint list '", list, "': ", url, " is given twice");
    out.emplace_back(url);
  }
  return out;
}

struct FailoverClient::Endpoint {
  std::string url;
  std::unique_ptr<HttpClient> client;
  // Guarded by FailoverClient::mu_.
  int failures_in_a_row = 0;
  Clock::time_point rest_until{};
  uint64_t tries = 0, failures = 0;
};

struct FailoverClient::Call {
  size_t start = 0;  // the endpoint this call tries first
  int tries = 0;
  Clock::time_point deadline;
  const std::atomic<bool>* cancel = nullptr;
  std::vector<bool> failed;          // endpoints that failed this call
  std::vector<std::string> errors;   // each endpoint's last failure in this call
};

Result<std::unique_ptr<FailoverClient>> FailoverClient::create(std::string_view base_urls, FailoverOptions options) {
  TH_ASSIGN_OR_RETURN(std::vector<std::string> urls, parse_endpoint_list(base_urls));
  if (options.max_attempts < 0) return Status::error("failover: max_attempts must be 0 (automatic) or more");
  if (options.max_resumes < 0) return Status::error("failover: max_resumes must be 0 or more");
  if (options.max_attempts == 0) options.max_attempts = std::max<int>(3, static_cast<int>(2 * urls.size()));
  HttpClientOptions http = options.http;
  http.retry.max_attempts = 1;
  http.stream_idle_timeout = options.stream_idle_timeout;
  std::vector<std::unique_ptr<Endpoint>> endpoints;
  for (const std::string& url : urls) {
    auto e = std::make_unique<Endpoint>();
    e->url = url;
    TH_ASSIGN_OR_RETURN(e->client, HttpClient::create(url, http));
    endpoints.push_back(std::move(e));
  }
  return std::unique_ptr<FailoverClient>(new FailoverClient(std::move(endpoints), std::move(options)));
}

FailoverClient::FailoverClient(std::vector<std::unique_ptr<Endpoint>> endpoints, FailoverOptions options)
    : endpoints_(std::move(endpoints)),
      options_(std::move(options)),
      budget_(options_.budget, Clock::now()),
      rng_(options_.seed != 0 ? options_.seed : std::random_device{}()) {}

FailoverClient::~FailoverClient() = default;

FailoverStats FailoverClient::stats() const {
  FailoverStats s;
  s.calls = calls_.load();
  s.tries = tries_.load();
  s.failovers = failovers_.load();
  s.resumes = resumes_.load();
  s.budget_exhausted = budget_exhausted_.load();
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point now = Clock::now();
  for (const auto& e : endpoints_)
    s.endpoints.push_back({e->url, e->rest_until > now, e->failures_in_a_row, e->tries, e->failures});
  return s;
}

int FailoverClient::next_endpoint(Call& call, std::string* why, bool resume) {
  if (call.tries > 0) {
    if (call.tries >= options_.max_attempts) {
      *why = tries_text(call.tries);
      return -1;
    }
    if (call.cancel && call.cancel->load(std::memory_order_relaxed)) {
      *why = "cancelled";
      return -1;
    }
    if (Clock::now() >= call.deadline) {
      *why = cat("no answer within the request timeout (", options_.http.request_timeout.count(), " ms)");
      return -1;
    }
    if (!resume && !budget_.try_spend(Clock::now())) {
      budget_exhausted_.fetch_add(1, std::memory_order_relaxed);
      *why = tries_text(call.tries) + ", then the retry budget was empty";
      return -1;
    }
    failovers_.fetch_add(1, std::memory_order_relaxed);
  }
  const size_t n = endpoints_.size();
  int pick = -1, fallback = -1, soonest = -1;
  Clock::time_point wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Clock::time_point now = Clock::now();
    for (size_t k = 0; k < n; ++k) {
      const size_t e = (call.start + static_cast<size_t>(call.tries) + k) % n;
      const Endpoint& ep = *endpoints_[e];
      if (ep.rest_until <= now) {
        if (!call.failed[e]) {
          pick = static_cast<int>(e);
          break;
        }
        if (fallback < 0) fallback = static_cast<int>(e);
      } else if (soonest < 0 || ep.rest_until < wake) {
        soonest = static_cast<int>(e);
        wake = ep.rest_until;
      }
    }
  }
  if (pick < 0) pick = fallback;
  if (pick >= 0) return pick;
  // Every endpoint rests: wait for the first to end its rest (one bounded wait per try).
  if (wake >= call.deadline) {
    *why = "every endpoint is resting past the request timeout";
    return -1;
  }
  const auto delay = std::chrono::ceil<std::chrono::milliseconds>(wake - Clock::now());
  if (delay.count() > 0) {
    if (options_.sleep) options_.sleep(delay);
    else std::this_thread::sleep_for(delay);
  }
  return soonest;
}

void FailoverClient::record(int e, bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  Endpoint& ep = *endpoints_[static_cast<size_t>(e)];
  ++ep.tries;
  if (ok) {
    ep.failures_in_a_row = 0;
    ep.rest_until = Clock::time_point{};
    return;
  }
  ++ep.failures;
  ep.failures_in_a_row = std::min(ep.failures_in_a_row + 1, 30);
  ep.rest_until = Clock::now() + backoff_ceiling(ep.failures_in_a_row - 1, options_.down_base, options_.down_max);
}

Status FailoverClient::give_up(const Call& call, std::string_view path, const std::string& why) const {
  std::string detail;
  for (size_t e = 0; e < endpoints_.size(); ++e) {
    if (call.errors[e].empty()) continue;
    if (!detail.empty()) detail += "; ";
    detail += endpoints_[e]->url + ": " + call.errors[e];
  }
  return Status::errorf(path, ": every endpoint failed (", endpoints_.size(), " endpoints, ", why, ")",
                        detail.empty() ? std::string() : ": " + detail);
}

Result<Response> FailoverClient::request(std::string method, std::string path, std::string body,
                                         std::vector<Header> headers, const std::atomic<bool>* cancel) {
  calls_.fetch_add(1, std::memory_order_relaxed);
  budget_.on_request(Clock::now());
  Call call{next_.fetch_add(1) % endpoints_.size(), 0, Clock::now() + options_.http.request_timeout, cancel,
            std::vector<bool>(endpoints_.size()), std::vector<std::string>(endpoints_.size())};
  std::optional<Response> last_answer;
  std::string why;
  for (int e; (e = next_endpoint(call, &why)) >= 0;) {
    ++call.tries;
    tries_.fetch_add(1, std::memory_order_relaxed);
    const size_t i = static_cast<size_t>(e);
    Result<Response> r = endpoints_[i]->client->request(method, path, body, headers, cancel);
    if (r.ok() && !is_retryable_status(r->status)) {
      record(e, true);
      r->attempts = call.tries;
      return r;
    }
    if (!r.ok() && cancel && cancel->load()) return r.status();
    record(e, r.ok() && !is_failing_status(r->status));
    call.failed[i] = true;
    call.errors[i] = r.ok() ? cat("HTTP ", r->status, " ", first_line(r->body)) : r.message();
    if (r.ok()) last_answer = std::move(*r);
  }
  if (last_answer) {
    last_answer->attempts = call.tries;
    return std::move(*last_answer);  // every endpoint was busy or failing: the last one's answer
  }
  return give_up(call, path, why);
}

Result<Response> FailoverClient::stream_events(std::string method, std::string path, std::string body,
                                               SseReader::OnEvent on_event, std::vector<Header> headers,
                                               const std::atomic<bool>* cancel) {
  if (!on_event) return Status::error("stream_events: no on_event callback");
  calls_.fetch_add(1, std::memory_order_relaxed);
  budget_.on_request(Clock::now());
  uint64_t seed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seed = rng_();
  }
  const StreamRequest q = prepare_stream_request(path, body, seed);
  StreamProgress p;
  bool stopped = false;
  SseReader::OnEvent pass = [&](const SseEvent& from) {
    std::optional<std::string> out = rewrite_event(from.data, q, p);
    if (!out) return true;
    SseEvent e = from;
    e.data = std::move(*out);
    if (on_event(e)) return true;
    stopped = true;
    return false;
  };
  Call call{next_.fetch_add(1) % endpoints_.size(), 0, Clock::now() + options_.http.request_timeout, cancel,
            std::vector<bool>(endpoints_.size()), std::vector<std::string>(endpoints_.size())};
  std::optional<Response> last_answer;
  std::string why;
  int resumes = 0;
  for (int e; (e = next_endpoint(call, &why, p.events > 0)) >= 0;) {
    ++call.tries;
    tries_.fetch_add(1, std::memory_order_relaxed);
    const size_t i = static_cast<size_t>(e);
    const bool resuming = p.events > 0;
    Result<Response> r = endpoints_[i]->client->stream_events(method, path, resuming ? resume_body(q, p) : q.body, pass,
                                                              headers, cancel);
    if (r.ok() && (r->status < 200 || r->status > 299) && !is_retryable_status(r->status)) {
      record(e, true);  // an answer: the endpoint works, the request is refused
      if (!resuming) return r;
      return Status::errorf(path, ": resuming the stream through ", endpoints_[i]->url, ": HTTP ", r->status, " ",
                            first_line(r->body));
    }
    if (r.ok() && r->status >= 200 && r->status <= 299) {
      record(e, true);
      r->attempts = call.tries;
      return r;  // the stream's end: [DONE], the caller stopped, or the server closed it
    }
    if (!r.ok() && (stopped || (cancel && cancel->load()))) return r.status();
    record(e, r.ok() && !is_failing_status(r->status));
    call.failed[i] = true;
    call.errors[i] = r.ok() ? cat("HTTP ", r->status, " ", first_line(r->body)) : r.message();
    if (r.ok() && !resuming) last_answer = std::move(*r);
    if (p.events == 0) continue;  // nothing reached the caller: the same request elsewhere
    if ((q.movable && p.all_finished(static_cast<size_t>(q.choices()))) || p.done)
      return finish_stream(q, p, on_event, call.tries);  // only the usage chunk and [DONE] were missing
    if (!can_resume(q, p))
      return Status::errorf(path, ": the stream through ", endpoints_[i]->url, " broke after ", p.events,
                            " events and cannot move (it needs stream, no echo, no continuation of its own,"
                            " and chunks it can read): ", call.errors[i]);
    if (resumes == options_.max_resumes)
      return Status::errorf(path, ": the stream broke ", resumes + 1, " times (at most ", options_.max_resumes,
                            " resumes): ", call.errors[i]);
    if (q.choices() > 1) return resume_choices(call, resumes, q, p, method, path, headers, on_event, cancel);
    ++resumes;
    resumes_.fetch_add(1, std::memory_order_relaxed);
  }
  if (last_answer) {
    last_answer->attempts = call.tries;
    return std::move(*last_answer);
  }
  return give_up(call, path, why);
}

// The choices of one stream going on alone, each on its own request (run_leg), on up to
// kMaxLegThreads threads; the caller's thread passes their events on (resume_choices).
struct FailoverClient::Split {
  Split(const StreamRequest& q, StreamProgress& p, const std::string& method, const std::string& path,
        const std::vector<Header>& headers)
      : q(q), p(p), method(method), path(path), headers(headers) {}
  const StreamRequest& q;
  StreamProgress& p;  // guarded by mu
  const std::string& method;
  const std::string& path;
  const std::vector<Header>& headers;
  std::vector<int64_t> todo;       // the unfinished choices
  std::atomic<size_t> next{0};     // ... the next one a thread takes
  std::atomic<bool> stop{false};   // the caller stopped or cancelled, or a choice failed
  std::atomic<int> tries{0};       // every leg's together
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> out;     // events for the caller, in the order they came
  size_t live = 0;                 // threads still running
  std::optional<Status> failed;    // the first choice that could not go on
};

Result<Response> FailoverClient::resume_choices(const Call& whole, int resumes, const StreamRequest& q,
                                                StreamProgress& p, const std::string& method, const std::string& path,
                                                const std::vector<Header>& headers, const SseReader::OnEvent& on_event,
                                                const std::atomic<bool>* cancel) {
  Split s(q, p, method, path, headers);
  for (int64_t i = 0; i < q.choices(); ++i)
    if (!p.choice(i).finished) s.todo.push_back(i);
  s.live = std::min(s.todo.size(), kMaxLegThreads);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < s.live; ++k) threads.emplace_back([this, &s, &whole, resumes] { run_legs(s, whole, resumes); });
  // Events go to the caller on its own thread; a cancel is seen within 10 ms.
  bool stopped = false;
  for (bool last = false; !last;) {
    std::deque<std::string> batch;
    {
      std::unique_lock<std::mutex> lock(s.mu);
      s.cv.wait_for(lock, std::chrono::milliseconds(10), [&] { return !s.out.empty() || s.live == 0; });
      batch.swap(s.out);
      last = s.live == 0;
    }
    if (cancel && cancel->load()) s.stop.store(true);
    for (std::string& data : batch) {
      if (s.stop.load()) break;
      SseEvent e;
      e.data = std::move(data);
      if (!on_event(e)) {
        stopped = true;
        s.stop.store(true);
      }
    }
  }
  for (std::thread& t : threads) t.join();
  const int tries = whole.tries + s.tries.load();
  if (stopped) {
    Response r;
    r.status = 200;
    r.cancelled = true;
    r.attempts = tries;
    return r;
  }
  if (cancel && cancel->load()) return Status::errorf(path, ": cancelled");
  if (s.failed) return *s.failed;
  return finish_stream(q, p, on_event, tries);
}

void FailoverClient::run_legs(Split& s, const Call& whole, int resumes) {
  for (size_t k = 0; !s.stop.load() && (k = s.next.fetch_add(1)) < s.todo.size();) {
    Status st = run_leg(s, whole, s.todo[k], resumes);
    if (st.ok()) continue;
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.failed) s.failed = std::move(st);
    s.stop.store(true);
  }
  std::lock_guard<std::mutex> lock(s.mu);
  --s.live;
  s.cv.notify_all();
}

Status FailoverClient::run_leg(Split& s, Call call, int64_t index, int resumes) {
  bool done = false;
  SseReader::OnEvent pass = [&](const SseEvent& from) {
    if (s.stop.load()) return false;
    if (from.data == "[DONE]") {  // this choice's; the stream's goes out when every choice is done
      done = true;
      return true;
    }
    std::lock_guard<std::mutex> lock(s.mu);
    if (std::optional<std::string> out = rewrite_event(from.data, s.q, s.p, index)) {
      s.out.push_back(std::move(*out));
      s.cv.notify_all();
    }
    return true;
  };
  ++resumes;  // the choice's first request is its move
  resumes_.fetch_add(1, std::memory_order_relaxed);
  std::string why;
  for (int e; (e = next_endpoint(call, &why, /*resume=*/true)) >= 0;) {
    ++call.tries;
    s.tries.fetch_add(1);
    tries_.fetch_add(1, std::memory_order_relaxed);
    const size_t i = static_cast<size_t>(e);
    std::string body;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      body = choice_resume_body(s.q, s.p, index);
    }
    done = false;
    Result<Response> r = endpoints_[i]->client->stream_events(s.method, s.path, std::move(body), pass, s.headers, &s.stop);
    if (s.stop.load()) return ok_status();  // the caller stopped, or another choice failed
    if (r.ok() && !is_2xx(r->status) && !is_retryable_status(r->status)) {
      record(e, true);  // an answer: the endpoint works, the request is refused
      return Status::errorf(s.path, ": resuming choice ", index, " through ", endpoints_[i]->url, ": HTTP ", r->status,
                            " ", first_line(r->body));
    }
    bool finished = false, movable = false;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      finished = s.p.choice(index).finished;
      movable = can_resume(s.q, s.p);
    }
    if (r.ok() && is_2xx(r->status) && (done || finished)) {
      record(e, true);
      return ok_status();
    }
    // Broken, busy, failing, or closed before the choice's finish.
    record(e, r.ok() && !is_2xx(r->status) && !is_failing_status(r->status));
    call.failed[i] = true;
    call.errors[i] = !r.ok()           ? r.message()
                     : is_2xx(r->status) ? std::string("the stream ended before the choice's finish")
                                         : cat("HTTP ", r->status, " ", first_line(r->body));
    if (finished) return ok_status();  // only its [DONE] was missing
    if (!movable)
      return Status::errorf(s.path, ": choice ", index, " through ", endpoints_[i]->url,
                            " cannot move on: ", call.errors[i]);
    if (resumes >= options_.max_resumes)
      return Status::errorf(s.path, ": choice ", index, " broke ", resumes + 1, " times (at most ", options_.max_resumes,
                            " resumes): ", call.errors[i]);
    ++resumes;
    resumes_.fetch_add(1, std::memory_order_relaxed);
  }
  return give_up(call, s.path, cat("choice ", index, ": ", why));
}

}  // namespace th::client
