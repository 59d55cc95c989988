// FailoverClient without a model: endpoint lists, every endpoint down, the shared budget.
// (Two routers and a router killed mid-stream: tests/integration/failover_client_test.cpp.)
#include "client/failover_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace th::client {
namespace {

using namespace std::chrono_literals;

// A loopback port bound but not listening: a connect is refused at once, and no other test
// can take the port while the fd is open.
struct RefusingPort {
  int fd = -1, port = 0;
  RefusingPort() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
  }
  ~RefusingPort() { ::close(fd); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
};

// A server on a loopback port for `count` connections, one after another: it reads one
// request (head and Content-Length body) from each, keeps its body, writes answer(body) and
// closes.
class OneShotServer {
 public:
  explicit OneShotServer(std::string answer) : OneShotServer([answer](const std::string&) { return answer; }, 1) {}
  OneShotServer(std::function<std::string(const std::string&)> answer, int count)
      : answer_(std::move(answer)), count_(count) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd_, 16) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (int i = 0; i < count_ && serve(); ++i) {
      }
    });
  }
  ~OneShotServer() {
    stop();
    ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  /// @brief The body of the first request it got ("" when none came): it stops serving first.
  std::string request_body() {
    stop();
    return bodies_.empty() ? std::string() : bodies_[0];
  }
  /// @brief Every request's body, in the order they came: it stops serving first.
  const std::vector<std::string>& request_bodies() {
    stop();
    return bodies_;
  }

 private:
  void stop() {
    ::shutdown(fd_, SHUT_RDWR);  // ends a wait in accept()
    if (thread_.joinable()) thread_.join();
  }
  bool serve() {
    const int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) return false;
    std::string in;
    char buf[4096];
    size_t head_end = std::string::npos, want = 0;
    while (head_end == std::string::npos || in.size() < head_end + 4 + want) {
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      in.append(buf, static_cast<size_t>(n));
      if (head_end == std::string::npos && (head_end = in.find("\r\n\r\n")) != std::string::npos) {
        const size_t cl = in.find("Content-Length: ");
        if (cl != std::string::npos && cl < head_end) want = std::stoul(in.substr(cl + 16));
      }
    }
    const std::string body = head_end != std::string::npos ? in.substr(head_end + 4) : std::string();
    bodies_.push_back(body);
    const std::string answer = answer_(body);
    ::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
    ::close(c);
    return true;
  }

  int fd_ = -1, port_ = 0;
  std::function<std::string(const std::string&)> answer_;
  int count_ = 1;
  std::vector<std::string> bodies_;
  std::thread thread_;
};

// SSE events as one chunk each of a chunked 200 response; `end` adds the last chunk.
std::string sse_answer(const std::vector<std::string>& events, bool end) {
  std::string out = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const std::string& e : events) {
    const std::string piece = "data: " + e + "\n\n";
    char size[16];
    std::snprintf(size, sizeof size, "%zx", piece.size());
    out += std::string(size) + "\r\n" + piece + "\r\n";
  }
  if (end) out += "0\r\n\r\n";
  return out;
}

TEST(FailoverClient, AStreamBrokenMidwayGoesOnThroughTheNextEndpointWithItsContinuation) {
  // The first endpoint sends two tokens and breaks off inside the chunked body.
  OneShotServer a(sse_answer({R"({"id":"cmpl-1","created":5,"choices":[{"index":0,"text":" Once","prompt_token_ids":[1,7],"token_ids":[40],"finish_reason":null}]})",
                              R"({"id":"cmpl-1","created":5,"choices":[{"index":0,"text":" upon","token_ids":[41],"finish_reason":null}]})"},
                             false));
  OneShotServer b(sse_answer({R"({"id":"cmpl-2","created":9,"choices":[{"index":0,"text":" a","token_ids":[42],"finish_reason":"length"}]})",
                              "[DONE]"},
                             true));
  FailoverOptions o;
  o.seed = 3;
  auto c = FailoverClient::create(a.url() + "," + b.url(), o);
  ASSERT_TRUE(c.ok()) << c.message();
  std::vector<std::string> got;
  Result<Response> r = (*c)->stream_events("POST", "/v1/completions", R"({"prompt":"Once","max_tokens":3,"stream":true})",
                                           [&](const SseEvent& e) {
                                             got.push_back(e.data);
                                             return true;
                                           });
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->attempts, 2);
  // The caller sees one stream: the first endpoint's id and time, no ids it did not ask for.
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], R"({"id":"cmpl-1","created":5,"choices":[{"index":0,"text":" Once","finish_reason":null}]})");
  EXPECT_EQ(got[2], R"({"id":"cmpl-1","created":5,"choices":[{"index":0,"text":" a","finish_reason":"length"}]})");
  EXPECT_EQ(got[3], "[DONE]");
  // The second endpoint was asked to go on from there, with the same seed.
  const nlohmann::json sent = nlohmann::json::parse(b.request_body());
  EXPECT_EQ(sent["continuation"], nlohmann::json::parse(R"({"prompt_token_ids":[1,7],"token_ids":[40,41],"text_bytes":10})"));
  EXPECT_EQ(sent["seed"], nlohmann::json::parse(a.request_body())["seed"]);
  EXPECT_EQ(sent["return_token_ids"], true);
  EXPECT_EQ((*c)->stats().resumes, 1u);
}

// A router's death breaks every stream through it at once (the soak: ~100 in flight against a
// budget of 10): a stream broken midway goes on through another endpoint even with the retry
// budget empty, since a resume is not new load (max_resumes bounds it per stream).
TEST(FailoverClient, AStreamBrokenMidwayResumesWithTheRetryBudgetEmpty) {
  OneShotServer a(sse_answer({R"({"id":"cmpl-1","created":5,"choices":[{"index":0,"text":" Once","prompt_token_ids":[1,7],"token_ids":[40],"finish_reason":null}]})"},
                             false));
  OneShotServer b(sse_answer({R"({"id":"cmpl-2","created":9,"choices":[{"index":0,"text":" upon","token_ids":[41],"finish_reason":"length"}]})",
                              "[DONE]"},
                             true));
  FailoverOptions o;
  o.seed = 3;
  o.budget = {/*ratio=*/0.0, /*min_per_second=*/0.0, /*capacity=*/0.0};
  auto c = FailoverClient::create(a.url() + "," + b.url(), o);
  ASSERT_TRUE(c.ok()) << c.message();
  std::vector<std::string> got;
  Result<Response> r = (*c)->stream_events("POST", "/v1/completions", R"({"prompt":"Once","max_tokens":2,"stream":true})",
                                           [&](const SseEvent& e) {
                                             got.push_back(e.data);
                                             return true;
                                           });
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2], "[DONE]");
  const FailoverStats s = (*c)->stats();
  EXPECT_EQ(s.resumes, 1u);
  EXPECT_EQ(s.budget_exhausted, 0u);
}

// n 2: the first endpoint breaks after a token of each choice; each choice goes on alone
// through the next endpoint (n 1, its seed, its continuation), its chunks come back under its
// index, the legs' usage chunks are dropped and the stream's is made from what the caller has.
TEST(FailoverClient, SeveralChoicesBrokenMidwayGoOnOneByOne) {
  OneShotServer a(sse_answer({R"({"id":"cmpl-1","object":"text_completion","created":5,"model":"m","choices":[{"index":0,"text":" A","prompt_token_ids":[1,7],"token_ids":[40],"finish_reason":null}]})",
                              R"({"id":"cmpl-1","object":"text_completion","created":5,"model":"m","choices":[{"index":1,"text":" B","prompt_token_ids":[1,7],"token_ids":[50],"finish_reason":null}]})"},
                             false));
  // Each leg's answer by the continuation it carries: choice 0 went on from 40, choice 1 from 50.
  OneShotServer b(
      [](const std::string& body) {
        const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
        const bool first = j.is_object() && j.contains("continuation") && j["continuation"]["token_ids"] == nlohmann::json::array({40});
        const std::string text = first ? " a" : " b";
        const std::string id = first ? "41" : "51";
        return sse_answer({R"({"id":"cmpl-2","created":9,"choices":[{"index":0,"text":")" + text + R"(","token_ids":[)" + id +
                               R"(],"finish_reason":"length"}]})",
                           R"({"id":"cmpl-2","created":9,"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}})",
                           "[DONE]"},
                          true);
      },
      2);
  FailoverOptions o;
  o.seed = 3;
  auto c = FailoverClient::create(a.url() + "," + b.url(), o);
  ASSERT_TRUE(c.ok()) << c.message();
  std::vector<std::string> got;
  const std::thread::id caller = std::this_thread::get_id();
  bool other_thread = false;
  Result<Response> r = (*c)->stream_events(
      "POST", "/v1/completions", R"({"prompt":"Once","n":2,"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}})",
      [&](const SseEvent& e) {
        other_thread = other_thread || std::this_thread::get_id() != caller;
        got.push_back(e.data);
        return true;
      });
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->attempts, 3);
  EXPECT_FALSE(other_thread);  // the legs run on threads of their own; the caller's events do not
  ASSERT_EQ(got.size(), 6u);
  // The legs' events in whatever order they came, each under its choice's index.
  const std::set<std::string> legs = {got[2], got[3]};
  EXPECT_EQ(legs, (std::set<std::string>{
                      R"({"id":"cmpl-1","created":5,"choices":[{"index":0,"text":" a","finish_reason":"length"}]})",
                      R"({"id":"cmpl-1","created":5,"choices":[{"index":1,"text":" b","finish_reason":"length"}]})"}));
  // The prompt once, both choices' two tokens.
  EXPECT_EQ(got[4], R"({"id":"cmpl-1","object":"text_completion","created":5,"model":"m","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":4,"total_tokens":6}})");
  EXPECT_EQ(got[5], "[DONE]");
  const nlohmann::json first = nlohmann::json::parse(a.request_body());
  std::set<int64_t> seeds;
  for (const std::string& body : b.request_bodies()) {
    const nlohmann::json sent = nlohmann::json::parse(body);
    EXPECT_EQ(sent["n"], 1);
    EXPECT_EQ(sent["prompt"], "Once");
    EXPECT_EQ(sent["continuation"]["prompt_token_ids"], nlohmann::json::array({1, 7}));
    EXPECT_EQ(sent["continuation"]["text_bytes"], 2);
    // Choice k was drawn with the stream's seed + k: it goes on with that.
    const int64_t k = sent["continuation"]["token_ids"] == nlohmann::json::array({40}) ? 0 : 1;
    EXPECT_EQ(sent["seed"].get<int64_t>(), first["seed"].get<int64_t>() + k);
    seeds.insert(sent["seed"].get<int64_t>());
  }
  EXPECT_EQ(seeds.size(), 2u);
  const FailoverStats s = (*c)->stats();
  EXPECT_EQ(s.resumes, 2u);  // one per choice
  EXPECT_EQ(s.tries, 3u);
}

// The endpoint dies after every choice's finish, before its usage chunk and [DONE]: nothing
// is resumed; the caller gets the usage chunk made from what it has, then [DONE].
TEST(FailoverClient, AStreamBrokenAfterTheLastFinishGetsItsUsageAndDone) {
  OneShotServer a(sse_answer({R"({"id":"cmpl-1","object":"text_completion","created":5,"model":"m","choices":[{"index":0,"text":" A","prompt_token_ids":[1,7,9],"token_ids":[40],"finish_reason":"length"},{"index":1,"text":" B","prompt_token_ids":[1,7,9],"token_ids":[50],"finish_reason":"length"}]})"},
                             false));
  RefusingPort unused;  // nothing is resumed: never tried
  auto c = FailoverClient::create(a.url() + "," + unused.url());
  ASSERT_TRUE(c.ok()) << c.message();
  std::vector<std::string> got;
  Result<Response> r = (*c)->stream_events(
      "POST", "/v1/completions", R"({"prompt":"Once","n":2,"max_tokens":1,"stream":true,"stream_options":{"include_usage":true}})",
      [&](const SseEvent& e) {
        got.push_back(e.data);
        return true;
      });
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->status, 200);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1], R"({"id":"cmpl-1","object":"text_completion","created":5,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}})");
  EXPECT_EQ(got[2], "[DONE]");
  const FailoverStats s = (*c)->stats();
  EXPECT_EQ(s.tries, 1u);
  EXPECT_EQ(s.resumes, 0u);
}

// A choice's own request refused (a 400, not a failure): the stream ends with that error.
TEST(FailoverClient, AChoiceRefusedWhileMovingEndsTheStreamWithItsError) {
  OneShotServer a(sse_answer({R"({"id":"cmpl-1","choices":[{"index":0,"text":" A","prompt_token_ids":[1],"token_ids":[40]},{"index":1,"text":" B","prompt_token_ids":[1],"token_ids":[50]}]})"},
                             false));
  OneShotServer b(
      [](const std::string&) {
        const std::string doc = R"({"error":{"message":"continuation: bad"}})";
        return "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: " +
               std::to_string(doc.size()) + "\r\n\r\n" + doc;
      },
      2);
  auto c = FailoverClient::create(a.url() + "," + b.url());
  ASSERT_TRUE(c.ok()) << c.message();
  int events = 0;
  Result<Response> r = (*c)->stream_events("POST", "/v1/completions", R"({"prompt":"Once","n":2,"stream":true})",
                                           [&](const SseEvent&) {
                                             ++events;
                                             return true;
                                           });
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find(": HTTP 400 {\"error\":{\"message\":\"continuation: bad\"}}"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("/v1/completions: resuming choice "), std::string::npos) << r.message();
  EXPECT_EQ(events, 1);  // the first endpoint's chunk, no [DONE]
}

TEST(FailoverClient, EndpointLists) {
  Result<std::vector<std::string>> ok = parse_endpoint_list("http://a:1, http://b:2/v1 ,http://[::1]:3");
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(*ok, (std::vector<std::string>{"http://a:1", "http://b:2/v1", "http://[::1]:3"}));
  EXPECT_EQ(parse_endpoint_list("http://a:1")->size(), 1u);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "entry 1 is empty"},
      {"http://a:1,", "entry 2 is empty"},
      {"http://a:1,,http://b:2", "entry 2 is empty"},
      {"http://a:1,ftp://b", "entry 2: base URL ftp://b: must start with http://"},
      {"http://a:1,http://b:99999", "entry 2: base URL http://b:99999: bad port"},
      {"http://a:1,https://b", "https is not supported"},
      {"http://a:1, http://a:1", "http://a:1 is given twice"},
  };
  for (const auto& [list, want] : bad) {
    Result<std::vector<std::string>> r = parse_endpoint_list(list);
    ASSERT_FALSE(r.ok()) << list;
    EXPECT_NE(r.message().find("endpoint list '" + list + "'"), std::string::npos) << r.message();
    EXPECT_NE(r.message().find(want), std::string::npos) << r.message();
  }
  Result<std::unique_ptr<FailoverClient>> c = FailoverClient::create("http://a:1,nope");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("entry 2: base URL nope"), std::string::npos) << c.message();
}

TEST(FailoverClient, EveryEndpointDownIsOneClearErrorAfterBoundedTries) {
  RefusingPort a, b;
  ASSERT_GT(a.port, 0);
  ASSERT_GT(b.port, 0);
  FailoverOptions o;
  o.down_base = 50ms;
  std::vector<std::chrono::milliseconds> waits;
  o.sleep = [&](std::chrono::milliseconds d) { waits.push_back(d); };  // no real waiting: the count is the point
  auto c = FailoverClient::create(a.url() + "," + b.url(), o);
  ASSERT_TRUE(c.ok()) << c.message();
  const auto start = std::chrono::steady_clock::now();
  Result<Response> r = (*c)->stream_events("POST", "/v1/completions", R"({"prompt":"x","stream":true})",
                                           [](const SseEvent&) { return true; });
  ASSERT_FALSE(r.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  // Both endpoints named with what went wrong, and why the client stopped: 2 per endpoint.
  EXPECT_NE(r.message().find("/v1/completions: every endpoint failed (2 endpoints, 4 tries)"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find(a.url() + ": "), std::string::npos) << r.message();
  EXPECT_NE(r.message().find(b.url() + ": "), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("refused"), std::string::npos) << r.message();
  const FailoverStats s = (*c)->stats();
  EXPECT_EQ(s.tries, 4u);
  EXPECT_EQ(s.endpoints[0].failures + s.endpoints[1].failures, 4u);
  EXPECT_EQ(s.endpoints[0].failures_in_a_row, 2);
  // Tries 3 and 4 found both endpoints resting and waited (once each) for the first to be back.
  ASSERT_EQ(waits.size(), 2u);
  for (std::chrono::milliseconds w : waits) EXPECT_LE(w, 100ms);
}

TEST(FailoverClient, TheRetryBudgetIsSharedByEveryEndpoint) {
  RefusingPort a, b, d;
  FailoverOptions o;
  o.budget = {/*ratio=*/0.0, /*min_per_second=*/0.0, /*capacity=*/2.0};
  o.sleep = [](std::chrono::milliseconds) {};
  auto c = FailoverClient::create(a.url() + "," + b.url() + "," + d.url(), o);
  ASSERT_TRUE(c.ok()) << c.message();
  Result<Response> first = (*c)->request("GET", "/v1/models");  // 1 try + the budget's 2 retries
  ASSERT_FALSE(first.ok());
  Result<Response> second = (*c)->request("GET", "/v1/models");  // 1 try, no retry left
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.message().find("1 try, then the retry budget was empty"), std::string::npos) << second.message();
  const FailoverStats s = (*c)->stats();
  EXPECT_EQ(s.tries, 4u);
  EXPECT_EQ(s.failovers, 2u);
  EXPECT_EQ(s.budget_exhausted, 2u);
  for (const EndpointStats& e : s.endpoints) EXPECT_TRUE(e.resting) << e.url;
}

}  // namespace
}  // namespace th::client
