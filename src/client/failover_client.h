// A client for several equivalent endpoints (routers, or cells serving the
// same model): it spreads calls across them, keeps each one's health, and
// when one fails mid-stream resumes the stream through another with the
// native continuation (stream_resume.h), so the caller sees one
// uninterrupted, token-identical stream. Safe to share between threads.
//
//   TH_ASSIGN_OR_RETURN(auto c, FailoverClient::create("http://10.0.0.1:8080,http://10.0.0.2:8080"));
//   c->stream_events("POST", "/v1/completions", body, [](const SseEvent& e) { ...; return true; });
//
// Spreading: call k starts at endpoint k mod N (round robin; the first call
// at the list's first), skipping endpoints resting after failures.
// Health: an endpoint that fails (no connection, a connection that breaks,
// 502/503/504) rests base * 2^(failures in a row - 1), at most down_max; a
// success ends its rest. With every endpoint resting, a call waits for the
// one whose rest ends first (a bounded wait, never a spin).
// Tries: a call tries at most max_attempts times, endpoints together, and
// every try after its first costs a token from one RetryBudget shared by all
// endpoints (retry_policy.h), so a crowd of failing calls adds at most
// ~ratio of load whatever the number of endpoints. Each endpoint's own
// HttpClient makes one try per call (its stale-connection redo aside).
// A stream's resume after it broke midway is not paid from the budget: it
// is not new load but the rest of a stream already admitted (its endpoint's
// work is gone), and max_resumes bounds it per stream; a router's death
// breaks every stream through it at once, more than the default burst of
// 10 (the soak, scripts/soak.sh, had ~100 in flight at a router's kill).
// A 429 is tried on the next endpoint without resting this one; any other
// status is the caller's answer.
// Several choices (n > 1, several prompts): a stream that breaks after its
// first byte goes on choice by choice, as the router moves them between cells
// (stream_resume.h): each unfinished choice is its own request of n 1 with its
// continuation, on up to 16 threads at once, each resumed again on its own at
// most max_resumes times (each choice's first request counts as a resume);
// their events reach `on_event` on the caller's thread, under the choice's
// index, then the usage chunk made from what the caller has (when it asked
// for one and no endpoint sent it) and one [DONE].
// A stream that cannot move (another path, no stream, echo, a continuation of
// the caller's own, after an error event or an unreadable chunk) passes
// through unchanged and ends with the error once it gave the caller data.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "client/http_client.h"
#include "client/retry_policy.h"
#include "client/sse_reader.h"

namespace th::client {

struct StreamRequest;   // stream_resume.h
struct StreamProgress;

struct FailoverOptions {
  HttpClientOptions http;  // every endpoint's client; its retry.max_attempts is set to 1 (the tries are ours)
  int max_attempts = 0;    // tries per call, endpoints together; 0 = 2 per endpoint, at least 3
  int max_resumes = 3;     // a stream goes on through another endpoint at most this many times
  // A stream whose endpoint stops sending mid-stream (hung, SIGSTOPped: its connection stays
  // open) is resumed elsewhere after this, not after http.request_timeout. The gap between
  // two events of a healthy stream is one engine step: ~10-100 ms decoding, up to ~1 s when
  // a 512-token prefill chunk shares the step on a CPU cell (BENCHMARKS.md); a router adds
  // up to its cell-failure detection (~300 ms) while it moves the stream. 2 s is above all
  // of them, so only a stalled endpoint trips it. Overrides http.stream_idle_timeout; 0: off.
  std::chrono::milliseconds stream_idle_timeout{2000};
  RetryBudgetOptions budget;  // one budget for every endpoint
  std::chrono::milliseconds down_base{250};  // rest after one failure: a killed router stays dead,
  std::chrono::milliseconds down_max{5000};  // a restarting one is back within seconds
  uint64_t seed = 0;  // the seeds given to streams without one; 0 = from std::random_device
  // How a call waits for a resting endpoint; null = std::this_thread::sleep_for.
  std::function<void(std::chrono::milliseconds)> sleep;
};

/// @brief The base URLs of a comma-separated list ("http://a:8080,http://b:8080"),
/// checked: an error naming the list and the entry when one is empty, not a
/// base URL (parse_base_url) or given twice.
Result<std::vector<std::string>> parse_endpoint_list(std::string_view list);

struct EndpointStats {
  std::string url;
  bool resting = false;          // in its rest after failures
  int failures_in_a_row = 0;
  uint64_t tries = 0, failures = 0;
};

struct FailoverStats {
  uint64_t calls = 0;
  uint64_t tries = 0;             // every endpoint's together
  uint64_t failovers = 0;         // tries after a call's first (each spent a budget token)
  uint64_t resumes = 0;           // streams that went on through another endpoint
  uint64_t budget_exhausted = 0;  // calls ended because the budget was empty
  std::vector<EndpointStats> endpoints;
};

class FailoverClient {
 public:
  /// @brief `base_urls`: one base URL or a comma-separated list (parse_endpoint_list).
  static Result<std::unique_ptr<FailoverClient>> create(std::string_view base_urls, FailoverOptions options = {});
  ~FailoverClient();
  FailoverClient(const FailoverClient&) = delete;
  FailoverClient& operator=(const FailoverClient&) = delete;

  /// @brief HttpClient::request on one endpoint, the next one after a failure.
  Result<Response> request(std::string method, std::string path, std::string body = {},
                           std::vector<Header> headers = {}, const std::atomic<bool>* cancel = nullptr);

  /// @brief HttpClient::stream_events; a stream that breaks goes on through
  /// another endpoint (see the file's comment). Response::attempts counts the tries.
  Result<Response> stream_events(std::string method, std::string path, std::string body, SseReader::OnEvent on_event,
                                 std::vector<Header> headers = {}, const std::atomic<bool>* cancel = nullptr);

  FailoverStats stats() const;
  size_t size() const { return endpoints_.size(); }

 private:
  struct Endpoint;
  struct Call;
  FailoverClient(std::vector<std::unique_ptr<Endpoint>> endpoints, FailoverOptions options);

  // The endpoint for the call's next try (waiting for one to end its rest when all rest); -1 when
  // the call must end (deadline, cancel, tries or budget): `why` says which.
  // A `resume` try (a stream broken midway) spends no budget token.
  int next_endpoint(Call& call, std::string* why, bool resume = false);
  void record(int e, bool ok);
  Status give_up(const Call& call, std::string_view path, const std::string& why) const;

  // A stream of several choices broken after its first byte (`whole` its call so far,
  // `resumes` its resumes): every unfinished choice goes on alone (the file's comment).
  struct Split;
  Result<Response> resume_choices(const Call& whole, int resumes, const StreamRequest& q, StreamProgress& p,
                                  const std::string& method, const std::string& path,
                                  const std::vector<Header>& headers, const SseReader::OnEvent& on_event,
                                  const std::atomic<bool>* cancel);
  void run_legs(Split& s, const Call& whole, int resumes);
  Status run_leg(Split& s, Call call, int64_t index, int resumes);

  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  FailoverOptions options_;
  RetryBudget budget_;
  std::atomic<uint64_t> next_{0};
  mutable std::mutex mu_;  // endpoints' health, the seed RNG
  std::mt19937_64 rng_;
  std::atomic<uint64_t> calls_{0}, tries_{0}, failovers_{0}, resumes_{0}, budget_exhausted_{0};
};

}  // namespace th::client
