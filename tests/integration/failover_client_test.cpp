// The failover client (client/failover_client.h) across `tokenhive router`s in front of two
// stories260K cells, all real processes on 127.0.0.1: the router a stream goes through is
// killed (-9) mid-stream and the caller's stream goes on through the next router, token for
// token the uninterrupted run's (greedy completions, then seeded chat: three routers in all,
// one per kill and one left, each routing to both cells); the same with several choices, each
// going on alone; an endpoint list with a dead entry works through the live one. (All endpoints down, malformed lists, the shared budget:
// tests/unit/client/failover_client_test.cpp.)
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/failover_client.h"
#include "client/http_client.h"
#include "serve_process.h"
#include "test_util.h"

namespace th {
namespace {

using json = nlohmann::json;
using test::ServeProcess;

std::vector<std::string> cell_args() {
  return {"-m", test::shared_path("models/stories260K.gguf"), "-t", "1", "--kv-cache-mib", "16", "--access-log", ""};
}

struct Streamed {
  std::string text, finish;
  std::vector<int32_t> ids;
  std::vector<std::string> chunk_ids;  // each chunk's "id"
  int roles = 0;                       // chat: chunks with the assistant's role
  bool done = false;
  std::string error;
};

// Reads one chunk into `out`; false when it is not a chunk.
bool take_chunk(const std::string& data, Streamed& out) {
  if (data == "[DONE]") {
    out.done = true;
    return true;
  }
  json j = json::parse(data, nullptr, false);
  if (!j.is_object() || j.contains("error")) {
    out.error = data;
    return false;
  }
  out.chunk_ids.push_back(j.value("id", ""));
  for (const json& c : j["choices"]) {
    out.text += c.value("text", "");
    if (c.contains("delta")) {
      out.text += c["delta"].value("content", "");
      out.roles += c["delta"].contains("role") ? 1 : 0;
    }
    for (const json& id : c.value("token_ids", json::array())) out.ids.push_back(id.get<int32_t>());
    if (!c["finish_reason"].is_null()) out.finish = c["finish_reason"];
  }
  return true;
}

const json kGreedy = {{"prompt", "Once upon a time"}, {"max_tokens", 400}, {"ignore_eos", true},
                      {"temperature", 0},             {"stream", true},    {"return_token_ids", true}};
const json kSeededChat = {{"messages", {{{"role", "user"}, {"content", "Tell me about a dog"}}}},
                          {"max_tokens", 300}, {"ignore_eos", true}, {"temperature", 0.9}, {"seed", 11},
                          {"stream", true},    {"return_token_ids", true}};

// A counter from `url`/metrics, -1 when absent.
double metric(const std::string& url, const std::string& name) {
  auto c = client::HttpClient::create(url);
  if (!c.ok()) return -1;
  Result<client::Response> r = (*c)->request("GET", "/metrics");
  if (!r.ok()) return -1;
  const size_t at = r->body.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(r->body.substr(at + name.size() + 2));
}

// The router at `url`'s view of `cell` (/admin/cells), null when it has none.
json cell_view(const std::string& url, const std::string& cell) {
  auto c = client::HttpClient::create(url);
  if (!c.ok()) return json();
  Result<client::Response> r = (*c)->request("GET", "/admin/cells");
  if (!r.ok() || r->status != 200) return json();
  const json j = json::parse(r->body, nullptr, false);
  if (!j.is_object()) return json();
  for (const json& x : j.value("cells", json::array()))
    if (x.value("url", "") == cell) return x;
  return json();
}

bool router_sees_dead(const std::string& url, const std::string& cell) {
  const json v = cell_view(url, cell);
  return v.is_object() && v.value("state", "") == "dead";
}

// One uninterrupted stream through `url` alone.
Streamed clean_run(const std::string& url, const std::string& path, const json& body) {
  Streamed out;
  auto plain = client::HttpClient::create(url);
  EXPECT_TRUE(plain.ok());
  Result<client::Response> r = (*plain)->stream_events("POST", path, body.dump(),
                                                       [&](const client::SseEvent& e) { return take_chunk(e.data, out); });
  EXPECT_TRUE(r.ok()) << r.message();
  if (r.ok()) {
    EXPECT_EQ(r->status, 200) << r->body;
  }
  return out;
}

// A socket bound to a loopback port but not listening: connecting to it is refused, and the
// port stays ours (no other test can take it) until the fd is closed.
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

TEST(FailoverClient, RouterKilledMidStreamGoesOnThroughTheNextRouterTokenIdentical) {
  ServeProcess cell_a(cell_args()), cell_b(cell_args());
  ASSERT_TRUE(cell_a.ok()) << cell_a.log();
  ASSERT_TRUE(cell_b.ok()) << cell_b.log();
  const std::vector<std::string> router_args = {"--cell", cell_a.url(), "--cell", cell_b.url()};
  ServeProcess first("router", router_args, 30), second("router", router_args, 30);
  ASSERT_TRUE(first.ok()) << first.log();
  ASSERT_TRUE(second.ok()) << second.log();

  // The uninterrupted run, through the second router alone.
  const Streamed clean = clean_run(second.url(), "/v1/completions", kGreedy);
  ASSERT_TRUE(clean.done) << clean.error;
  ASSERT_EQ(clean.ids.size(), 400u);

  // The first call goes to the list's first endpoint: the router killed after 20 tokens (of
  // 400: the cell would have to run 380 tokens ahead of this thread for the kill to miss the
  // stream, and then `resumes` below says so).
  client::FailoverOptions o;
  o.http.request_timeout = std::chrono::milliseconds(30'000);
  auto c = client::FailoverClient::create(first.url() + "," + second.url(), o);
  ASSERT_TRUE(c.ok()) << c.message();
  Streamed moved;
  bool killed = false;
  Result<client::Response> r = (*c)->stream_events("POST", "/v1/completions", kGreedy.dump(), [&](const client::SseEvent& e) {
    const bool ok = take_chunk(e.data, moved);
    if (!killed && moved.ids.size() >= 20) {
      ::kill(first.pid(), SIGKILL);
      killed = true;
    }
    return ok;
  });
  ASSERT_TRUE(r.ok()) << r.message() << "\n" << second.log();
  EXPECT_EQ(r->status, 200);
  ASSERT_TRUE(killed);
  EXPECT_EQ(first.wait(5), -1);  // died of the signal
  EXPECT_TRUE(moved.done) << moved.error;
  EXPECT_EQ(moved.finish, "length");
  EXPECT_EQ(moved.ids, clean.ids);
  EXPECT_EQ(moved.text, clean.text);
  ASSERT_FALSE(moved.chunk_ids.empty());
  for (const std::string& id : moved.chunk_ids) EXPECT_EQ(id, moved.chunk_ids.front());  // one stream to the caller
  const client::FailoverStats s = (*c)->stats();
  EXPECT_EQ(s.resumes, 1u);
  EXPECT_EQ(s.tries, 2u);
  EXPECT_EQ(s.endpoints[0].failures, 1u);
  EXPECT_EQ(s.endpoints[1].failures, 0u);

  // Seeded sampling over chat, the same way: the second router killed, the third goes on.
  ServeProcess third("router", router_args, 30);
  ASSERT_TRUE(third.ok()) << third.log();
  const Streamed clean_chat = clean_run(third.url(), "/v1/chat/completions", kSeededChat);
  ASSERT_TRUE(clean_chat.done) << clean_chat.error;
  ASSERT_EQ(clean_chat.ids.size(), 300u);
  auto c2 = client::FailoverClient::create(second.url() + "," + third.url(), o);
  ASSERT_TRUE(c2.ok()) << c2.message();
  Streamed chat;
  killed = false;
  std::string cell_killed;
  r = (*c2)->stream_events("POST", "/v1/chat/completions", kSeededChat.dump(), [&](const client::SseEvent& e) {
    const bool ok = take_chunk(e.data, chat);
    if (!killed && chat.ids.size() >= 20) {
      ::kill(second.pid(), SIGKILL);
      killed = true;
    }
    // Then the cell the third router resumed it on: the router moves the continuation on.
    if (killed && cell_killed.empty() && chat.ids.size() >= 60) {
      for (ServeProcess* cell : {&cell_a, &cell_b}) {
        const json v = cell_view(third.url(), cell->url());
        if (v.is_object() && v.value("requests_in_flight", 0) > 0) {
          ::kill(cell->pid(), SIGKILL);
          cell_killed = cell->url();
          break;
        }
      }
    }
    return ok;
  });
  ASSERT_TRUE(r.ok()) << r.message() << "\n" << third.log();
  EXPECT_TRUE(chat.done) << chat.error;
  EXPECT_EQ(chat.ids, clean_chat.ids);
  EXPECT_EQ(chat.text, clean_chat.text);
  EXPECT_EQ(chat.roles, 1);  // the role chunk once, though two routers began the answer
  EXPECT_EQ((*c2)->stats().resumes, 1u);
  EXPECT_FALSE(cell_killed.empty());
  // The third router moved the resumed stream off its dead cell (a continuation moves again).
  EXPECT_EQ(metric(third.url(), "tokenhive_router_migrations_total"), 1.0) << third.log();

  // Until the third router has seen its cell die, a call it sends there is a 502.
  for (int i = 0; i < 200 && !router_sees_dead(third.url(), cell_killed); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(router_sees_dead(third.url(), cell_killed)) << third.log();

  // A list with an entry nothing answers: every call gets through the live one.
  RefusingPort dead;
  ASSERT_GT(dead.port, 0);
  client::FailoverOptions long_rest = o;
  long_rest.down_base = long_rest.down_max = std::chrono::milliseconds(60'000);  // still resting at the third call, however slow the machine
  auto partial = client::FailoverClient::create(dead.url() + "," + third.url(), long_rest);
  ASSERT_TRUE(partial.ok()) << partial.message();
  for (int i = 0; i < 3; ++i) {
    Result<client::Response> models = (*partial)->request("GET", "/v1/models");
    ASSERT_TRUE(models.ok()) << models.message();
    EXPECT_EQ(models->status, 200);
  }
  const client::FailoverStats ps = (*partial)->stats();
  EXPECT_EQ(ps.endpoints[0].failures, 1u);  // tried once, then resting while the others went by
  EXPECT_TRUE(ps.endpoints[0].resting);
  EXPECT_EQ(ps.endpoints[1].tries, 3u);
}

// Every choice of a stream, by its index.
struct ChoiceStreams {
  std::map<int, std::string> text, finish;
  std::map<int, std::vector<int32_t>> ids;
  std::map<int, size_t> logprobs;  // logprobs.tokens entries
  std::map<int, int> roles;        // chat: chunks with the assistant's role
  std::set<std::string> chunk_ids;
  json usage;
  int done = 0;
  std::string error;

  bool each_has(int choices, size_t tokens) const {
    for (int i = 0; i < choices; ++i)
      if (ids.count(i) == 0 || ids.at(i).size() < tokens) return false;
    return true;
  }
};

bool take_choices(const std::string& data, ChoiceStreams& out) {
  if (data == "[DONE]") {
    ++out.done;
    return true;
  }
  json j = json::parse(data, nullptr, false);
  if (!j.is_object() || j.contains("error")) {
    out.error = data;
    return false;
  }
  out.chunk_ids.insert(j.value("id", ""));
  if (j.contains("usage") && !j["usage"].is_null()) out.usage = j["usage"];
  for (const json& c : j["choices"]) {
    const int i = c["index"];
    out.text[i] += c.contains("delta") ? c["delta"].value("content", "") : c.value("text", "");
    if (c.contains("delta") && c["delta"].contains("role")) ++out.roles[i];
    for (const json& id : c.value("token_ids", json::array())) out.ids[i].push_back(id.get<int32_t>());
    if (c.contains("logprobs") && c["logprobs"].is_object()) out.logprobs[i] += c["logprobs"]["tokens"].size();
    if (!c["finish_reason"].is_null()) out.finish[i] = c["finish_reason"];
  }
  return true;
}

// Several choices (#22): the router a stream goes through is killed once every choice has
// some tokens; each choice goes on alone through the other router (n 1, its prompt, its seed,
// its continuation; that router reads it as a continuation), token-identical to the
// uninterrupted run, under its own index, with one [DONE] and the uninterrupted run's usage
// (made by the client from what it got). Seeded completions over two prompts with n 3 (six
// choices, with logprobs), then greedy chat with n 3: one cell, three routers, one per kill.
TEST(FailoverClient, SeveralChoicesGoOnOneByOneThroughTheNextRouterTokenIdentical) {
  // Room for every choice at once (16 MiB of KV alone allows 5 sequences: the sixth would
  // start after the first ones finished), the killed router's and the moved ones together.
  std::vector<std::string> args = cell_args();
  args.insert(args.end(), {"--max-num-seqs", "16"});
  ServeProcess cell(args);
  ASSERT_TRUE(cell.ok()) << cell.log();
  const std::vector<std::string> router_args = {"--cell", cell.url()};
  ServeProcess first("router", router_args, 30), second("router", router_args, 30), third("router", router_args, 30);
  ASSERT_TRUE(first.ok()) << first.log();
  ASSERT_TRUE(second.ok()) << second.log();
  ASSERT_TRUE(third.ok()) << third.log();
  const json completions = {{"prompt", {"Once upon a time", "The little dog"}}, {"n", 3}, {"max_tokens", 100},
                            {"ignore_eos", true}, {"temperature", 0.9}, {"seed", 21}, {"stream", true},
                            {"return_token_ids", true}, {"logprobs", 1}, {"stream_options", {{"include_usage", true}}}};
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Tell me about a cat"}}}}, {"n", 3}, {"max_tokens", 100},
                     {"ignore_eos", true}, {"temperature", 0}, {"stream", true}, {"return_token_ids", true},
                     {"stream_options", {{"include_usage", true}}}};
  struct Case {
    std::string path;
    json body;
    int choices;
    ServeProcess* killed;
    ServeProcess* live;
  };
  for (const Case& k : {Case{"/v1/completions", completions, 6, &first, &second},
                        Case{"/v1/chat/completions", chat, 3, &second, &third}}) {
    SCOPED_TRACE(k.path);
    auto plain = client::HttpClient::create(k.live->url());
    ASSERT_TRUE(plain.ok());
    ChoiceStreams clean;
    Result<client::Response> r = (*plain)->stream_events("POST", k.path, k.body.dump(), [&](const client::SseEvent& e) {
      return take_choices(e.data, clean);
    });
    ASSERT_TRUE(r.ok()) << r.message();
    ASSERT_TRUE(clean.error.empty()) << clean.error;
    ASSERT_EQ(clean.ids.size(), static_cast<size_t>(k.choices));
    ASSERT_TRUE(clean.usage.is_object());

    // Killed after 10 tokens of each choice, of 100: a choice the cell ran 90 tokens ahead of
    // this thread has finished and does not move (seen once in ~80 runs on a loaded machine).
    client::FailoverOptions o;
    o.http.request_timeout = std::chrono::milliseconds(30'000);
    auto c = client::FailoverClient::create(k.killed->url() + "," + k.live->url(), o);
    ASSERT_TRUE(c.ok()) << c.message();
    ChoiceStreams moved;
    bool killed = false;
    std::string at_kill;  // each choice's tokens when the router was killed
    int unfinished = 0;   // ... and the choices without their finish then
    r = (*c)->stream_events("POST", k.path, k.body.dump(), [&](const client::SseEvent& e) {
      const bool ok = take_choices(e.data, moved);
      if (!killed && moved.each_has(k.choices, 10)) {
        ::kill(k.killed->pid(), SIGKILL);
        killed = true;
        for (const auto& [i, ids] : moved.ids) at_kill += cat(" ", i, ":", ids.size());
        unfinished = k.choices - static_cast<int>(moved.finish.size());
      }
      return ok;
    });
    ASSERT_TRUE(r.ok()) << r.message() << "\n" << k.live->log();
    EXPECT_EQ(r->status, 200);
    ASSERT_TRUE(killed);
    EXPECT_EQ(k.killed->wait(5), -1);  // died of the signal
    EXPECT_TRUE(moved.error.empty()) << moved.error;
    EXPECT_EQ(moved.done, 1);
    EXPECT_EQ(moved.chunk_ids.size(), 1u);  // one stream to the caller
    for (int i = 0; i < k.choices; ++i) {
      SCOPED_TRACE(i);
      EXPECT_EQ(moved.ids[i], clean.ids[i]);
      EXPECT_EQ(moved.text[i], clean.text[i]);
      EXPECT_EQ(moved.finish[i], "length");
      EXPECT_EQ(moved.logprobs[i], clean.logprobs[i]);
      EXPECT_EQ(moved.roles[i], clean.roles[i]);
    }
    EXPECT_EQ(moved.usage["prompt_tokens"], clean.usage["prompt_tokens"]);
    EXPECT_EQ(moved.usage["completion_tokens"], clean.usage["completion_tokens"]);
    EXPECT_EQ(moved.usage["total_tokens"], clean.usage["total_tokens"]);
    const client::FailoverStats s = (*c)->stats();
    // Every choice unfinished when the stream broke moved, once: at most those unfinished at
    // the kill (a finish the dead router had already sent can still arrive after it), and
    // every choice ended with its whole text (above).
    EXPECT_GE(unfinished, 2) << at_kill;  // several choices were mid-stream at the kill
    EXPECT_GE(s.resumes, 1u) << at_kill;
    EXPECT_LE(s.resumes, static_cast<uint64_t>(unfinished)) << at_kill;
    EXPECT_EQ(s.tries, 1 + s.resumes) << at_kill;
    EXPECT_EQ(s.endpoints[0].failures, 1u);
    EXPECT_EQ(s.endpoints[1].failures, 0u);
  }
}

// A router that stops sending mid-stream (SIGSTOP: its connections stay open, nothing comes)
// is left after the client's stream_idle_timeout, not its request_timeout (30 s here): the
// stream goes on through the other router, token-identical.
TEST(FailoverClient, RouterStoppedMidStreamIsLeftAfterTheIdleTimeout) {
  ServeProcess cell(cell_args());
  ASSERT_TRUE(cell.ok()) << cell.log();
  const std::vector<std::string> router_args = {"--cell", cell.url()};
  ServeProcess hung("router", router_args, 30), live("router", router_args, 30);
  ASSERT_TRUE(hung.ok()) << hung.log();
  ASSERT_TRUE(live.ok()) << live.log();
  // All 400 tokens, the router stopped after the first (at 120 tokens, stopped after 20, the
  // hung router once had relayed the whole stream to the client before the stop, and the
  // client never had to resume).
  const json& body = kGreedy;
  const Streamed clean = clean_run(live.url(), "/v1/completions", body);
  ASSERT_EQ(clean.ids.size(), 400u) << clean.error;

  client::FailoverOptions o;
  o.http.request_timeout = std::chrono::milliseconds(30'000);
  o.stream_idle_timeout = std::chrono::milliseconds(300);
  auto c = client::FailoverClient::create(hung.url() + "," + live.url(), o);
  ASSERT_TRUE(c.ok()) << c.message();
  Streamed moved;
  bool stopped = false;
  const auto start = std::chrono::steady_clock::now();
  Result<client::Response> r = (*c)->stream_events("POST", "/v1/completions", body.dump(), [&](const client::SseEvent& e) {
    const bool ok = take_chunk(e.data, moved);
    if (!stopped && !moved.ids.empty()) {
      ::kill(hung.pid(), SIGSTOP);
      stopped = true;
    }
    return ok;
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::kill(hung.pid(), SIGCONT);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_TRUE(stopped);
  EXPECT_TRUE(moved.done) << moved.error;
  EXPECT_EQ(moved.ids, clean.ids);
  EXPECT_EQ(moved.text, clean.text);
  EXPECT_EQ((*c)->stats().resumes, 1u);
  EXPECT_LT(seconds, 5.0);  // the idle timeout (0.3 s) and the rest, not the 30 s request timeout
}

}  // namespace
}  // namespace th
