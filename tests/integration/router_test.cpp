// `tokenhive router` in front of real `tokenhive serve` cells, all real
// processes on 127.0.0.1: routing, joining and leaving, and what the issue
// calls chaos — a cell killed (-9) and another hung (SIGSTOP) mid-stream while
// 64 streams run, every stream finishing with the output of the fault-free
// run, token for token — and a rolling restart of every cell under load with
// no failed request.
#include <gtest/gtest.h>

#include <signal.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/http_client.h"
#include "cluster/proxy_request.h"
#include "cluster/routing_policy.h"
#include "http/http_response.h"
#include "http/http_server.h"
#include "etcd_process.h"
#include "run_process.h"
#include "serve_process.h"
#include "test_util.h"

namespace th {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using test::ServeProcess;

using test::stories;

std::vector<std::string> router_cell_args(std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"-m", stories(), "-t", "1", "--kv-cache-mib", "32", "--access-log", "", "--shutdown-timeout", "30"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::unique_ptr<client::HttpClient> client_for(const std::string& url) {
  client::HttpClientOptions o;
  o.request_timeout = std::chrono::milliseconds(120'000);
  o.retry.max_attempts = 1;  // a failure must show, not be retried away
  auto c = client::HttpClient::create(url, o);
  EXPECT_TRUE(c.ok()) << c.message();
  return std::move(*c);
}

json get_json(client::HttpClient& c, const std::string& path) {
  Result<client::Response> r = c.request("GET", path);
  if (!r.ok() || r->status != 200) return json();
  return json::parse(r->body, nullptr, false);
}

// The router's view of one cell ("alive", "dead", "draining", "unknown"; "" when unknown to it).
std::string cell_state(client::HttpClient& router, const std::string& url) {
  json j = get_json(router, "/admin/cells");
  if (!j.is_object()) return "";
  for (const json& c : j["cells"])
    if (c["url"] == url) return c["state"];
  return "";
}

// Polls every 2 ms until the router says `state` for `url`; the time it took, or nullopt.
std::optional<double> wait_state(client::HttpClient& router, const std::string& url, const std::string& state,
                                 double timeout_s = 10) {
  const Clock::time_point start = Clock::now();
  while (Clock::now() - start < std::chrono::duration<double>(timeout_s)) {
    if (cell_state(router, url) == state) return std::chrono::duration<double>(Clock::now() - start).count();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return std::nullopt;
}

struct Outcome {
  bool ok = false;
  int status = 0;
  std::string text, finish, error;
  std::vector<int32_t> ids;
};

// One streamed request through `c`: the text, ids and finish reason it gave, and whether it
// ended properly (200, a finish reason, [DONE], no error event).
Outcome stream(client::HttpClient& c, const std::string& path, const json& body, std::atomic<int64_t>* tokens = nullptr) {
  Outcome o;
  bool done = false;
  Result<client::Response> r = c.stream_events("POST", path, body.dump(), [&](const client::SseEvent& e) {
    if (e.data == "[DONE]") {
      done = true;
      return true;
    }
    json j = json::parse(e.data, nullptr, false);
    if (!j.is_object()) {
      o.error = "bad chunk: " + e.data;
      return true;
    }
    if (j.contains("error")) o.error = j["error"].dump();
    for (const json& ch : j.value("choices", json::array())) {
      if (ch.contains("text")) o.text += ch["text"].get<std::string>();
      if (ch.contains("delta") && ch["delta"].contains("content")) o.text += ch["delta"]["content"].get<std::string>();
      if (ch.contains("token_ids"))
        for (const json& id : ch["token_ids"]) o.ids.push_back(id.get<int32_t>());
      if (tokens && ch.contains("token_ids")) tokens->fetch_add(static_cast<int64_t>(ch["token_ids"].size()));
      if (!ch["finish_reason"].is_null()) o.finish = ch["finish_reason"];
    }
    return true;
  });
  if (!r.ok()) {
    o.error = r.message();
    return o;
  }
  o.status = r->status;
  if (r->status != 200) o.error = r->body;
  o.ok = r->status == 200 && done && !o.finish.empty() && o.error.empty();
  return o;
}

// The chaos workload: 64 streams, greedy and seeded sampling, completions and chat.
std::vector<std::pair<std::string, json>> chaos_requests() {
  const std::vector<std::string> starts = {"Once upon a time", "The little dog", "Lily and Ben", "One day, a bird",
                                           "Tom had a red ball", "The sun was", "In the park", "Mom said"};
  std::vector<std::pair<std::string, json>> out;
  for (int i = 0; i < 64; ++i) {
    json b = {{"max_tokens", 160}, {"ignore_eos", true}, {"stream", true}, {"return_token_ids", true}};
    if (i % 2 == 0) {
      b["temperature"] = 0;
    } else {
      b["temperature"] = 0.9;
      b["seed"] = 1000 + i;
    }
    const std::string prompt = starts[static_cast<size_t>(i) % starts.size()] + (i >= 8 ? " " + std::to_string(i) : "");
    if (i % 8 == 7) {
      b["messages"] = json::array({{{"role", "user"}, {"content", prompt}}});
      out.emplace_back("/v1/chat/completions", b);
    } else {
      b["prompt"] = prompt;
      out.emplace_back("/v1/completions", b);
    }
  }
  return out;
}

std::vector<Outcome> run_all(const std::string& router_url, const std::vector<std::pair<std::string, json>>& reqs,
                             std::atomic<int64_t>* tokens) {
  std::vector<Outcome> out(reqs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < reqs.size(); ++i) {
    threads.emplace_back([&, i] {
      auto c = client_for(router_url);
      out[i] = stream(*c, reqs[i].first, reqs[i].second, tokens);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

std::string metric_line(client::HttpClient& router, const std::string& prefix) {
  Result<client::Response> r = router.request("GET", "/metrics");
  if (!r.ok()) return "";
  size_t pos = r->body.find("\n" + prefix);
  if (pos == std::string::npos) return "";
  return r->body.substr(pos + 1, r->body.find('\n', pos + 1) - pos - 1);
}

double metric_value(client::HttpClient& router, const std::string& name) {
  const std::string line = metric_line(router, name + " ");
  return line.empty() ? -1 : std::stod(line.substr(name.size() + 1));
}

TEST(RouterChaos, KillOneCellThenHangAnotherMidStreamAndEveryStreamFinishesExactly) {
  std::vector<std::unique_ptr<ServeProcess>> cells;
  std::vector<std::string> router_args = {"--workers", "128"};
  for (int i = 0; i < 3; ++i) {
    cells.push_back(std::make_unique<ServeProcess>(router_cell_args()));
    ASSERT_TRUE(cells.back()->ok()) << cells.back()->log();
    router_args.push_back("--cell");
    router_args.push_back(cells.back()->url());
  }
  ServeProcess router("router", router_args, 30);
  ASSERT_TRUE(router.ok()) << router.log();
  auto admin = client_for(router.url());
  for (const auto& c : cells) ASSERT_TRUE(wait_state(*admin, c->url(), "alive")) << router.log();

  const auto reqs = chaos_requests();
  std::atomic<int64_t> tokens{0};
  const std::vector<Outcome> clean = run_all(router.url(), reqs, &tokens);
  for (size_t i = 0; i < clean.size(); ++i) {
    ASSERT_TRUE(clean[i].ok) << i << ": " << clean[i].error;
    ASSERT_EQ(clean[i].ids.size(), 160u) << i;
  }

  // The same 64 streams again; mid-stream one cell is killed, then another hung.
  tokens = 0;
  std::vector<Outcome> chaos;
  std::thread load([&] { chaos = run_all(router.url(), reqs, &tokens); });
  auto busiest_alive = [&](const std::vector<bool>& skip) {
    json j = get_json(*admin, "/admin/cells");
    size_t best = 0;
    int64_t most = -1;
    for (size_t i = 0; i < cells.size(); ++i) {
      if (skip[i]) continue;
      for (const json& c : j["cells"])
        if (c["url"] == cells[i]->url() && c["requests_in_flight"].get<int64_t>() > most) {
          most = c["requests_in_flight"].get<int64_t>();
          best = i;
        }
    }
    return std::make_pair(best, most);
  };
  auto wait_tokens = [&](int64_t n) {
    const Clock::time_point until = Clock::now() + std::chrono::seconds(60);
    while (tokens.load() < n && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  wait_tokens(64 * 15);
  std::vector<bool> skip(cells.size(), false);
  const auto [killed, killed_streams] = busiest_alive(skip);
  ASSERT_GT(killed_streams, 0);
  const int64_t tokens_at_kill = tokens.load();
  ::kill(cells[killed]->pid(), SIGKILL);
  const std::optional<double> kill_detect = wait_state(*admin, cells[killed]->url(), "dead", 5);
  skip[killed] = true;

  wait_tokens(tokens_at_kill + 64 * 15);
  const auto [hung, hung_streams] = busiest_alive(skip);
  ::kill(cells[hung]->pid(), SIGSTOP);
  const std::optional<double> hang_detect = wait_state(*admin, cells[hung]->url(), "dead", 5);
  load.join();
  ::kill(cells[hung]->pid(), SIGCONT);

  ASSERT_TRUE(kill_detect.has_value()) << router.log();
  ASSERT_TRUE(hang_detect.has_value()) << router.log();
  std::printf("[ chaos ] killed cell %zu with %lld streams (dead after %.0f ms); hung cell %zu with %lld streams (dead after %.0f ms)\n",
              killed, static_cast<long long>(killed_streams), *kill_detect * 1000, hung, static_cast<long long>(hung_streams),
              *hang_detect * 1000);
  EXPECT_LT(*kill_detect, 0.5);
  EXPECT_LT(*hang_detect, 0.5);
  EXPECT_GT(hung_streams, 0);
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(chaos[i].ok) << chaos[i].error;
    EXPECT_EQ(chaos[i].ids, clean[i].ids);
    EXPECT_EQ(chaos[i].text, clean[i].text);
    EXPECT_EQ(chaos[i].finish, clean[i].finish);
  }
  // Streams moved, and the router measured its detections under 500 ms too.
  EXPECT_GE(metric_value(*admin, "tokenhive_router_migrations_total"), 2.0);
  EXPECT_GE(metric_value(*admin, "tokenhive_router_cell_deaths_total"), 2.0);
  EXPECT_EQ(metric_line(*admin, "tokenhive_router_failure_detection_seconds_bucket{le=\"0.5\"}"),
            "tokenhive_router_failure_detection_seconds_bucket{le=\"0.5\"} " +
                metric_line(*admin, "tokenhive_router_failure_detection_seconds_count").substr(
                    std::string("tokenhive_router_failure_detection_seconds_count ").size()));
  // The page passes promtool with these values in it.
  Result<client::Response> page = admin->request("GET", "/metrics");
  ASSERT_TRUE(page.ok());
  const std::string path = test::temp_path("router_metrics.txt");
  {
    std::ofstream(path) << page->body;
  }
  test::ProcessResult check = test::run_process({"/usr/bin/env", "promtool", "check", "metrics"}, 60, path);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err << "(promtool comes with scripts/setup.sh)";
  // The hung cell, resumed, is alive again and takes work.
  EXPECT_TRUE(wait_state(*admin, cells[hung]->url(), "alive", 10)) << router.log();
}

TEST(RouterBasics, RoutesJoinsLeavesAndPassesErrorsThrough) {
  ServeProcess router("router", {}, 30);
  ASSERT_TRUE(router.ok()) << router.log();
  auto rc = client_for(router.url());
  // No cell yet: not ready, and a request waits briefly for one, then 503s.
  EXPECT_EQ(rc->request("GET", "/ready")->status, 503);
  EXPECT_EQ(rc->request("POST", "/v1/completions", R"({"prompt":"x","max_tokens":2})")->status, 503);

  ServeProcess a(router_cell_args({"--join", router.url()}));
  ServeProcess b(router_cell_args({"--join", router.url()}));
  ASSERT_TRUE(a.ok() && b.ok()) << a.log() << b.log();
  ASSERT_TRUE(wait_state(*rc, a.url(), "alive"));
  ASSERT_TRUE(wait_state(*rc, b.url(), "alive"));
  EXPECT_EQ(rc->request("GET", "/ready")->status, 200);
  EXPECT_EQ(json::parse(rc->request("GET", "/v1/models")->body)["data"][0]["id"], "stories260K");

  // The router answers what a cell answers: the reference text, non-streaming and streaming.
  auto direct = client_for(a.url());
  const json greedy = {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}};
  Result<client::Response> via = rc->request("POST", "/v1/completions", greedy.dump());
  Result<client::Response> cell = direct->request("POST", "/v1/completions", greedy.dump());
  ASSERT_EQ(via->status, 200) << via->body;
  EXPECT_EQ(json::parse(via->body)["choices"][0]["text"], json::parse(cell->body)["choices"][0]["text"]);
  json streamed = greedy;
  streamed["stream"] = true;
  Outcome s = stream(*rc, "/v1/completions", streamed);
  EXPECT_TRUE(s.ok) << s.error;
  EXPECT_EQ(s.text, json::parse(cell->body)["choices"][0]["text"]);
  EXPECT_TRUE(s.ids.empty());  // the client did not ask for ids: the router's own are not shown
  // Several choices stream too (not movable after their first byte, but routed).
  json two = streamed;
  two["n"] = 2;
  two["seed"] = 5;
  two["temperature"] = 1;
  EXPECT_TRUE(stream(*rc, "/v1/completions", two).ok);

  // A cell's 400 reaches the client as it was; a body that is not JSON is the router's 400.
  Result<client::Response> bad = rc->request("POST", "/v1/completions", R"({"prompt":"x","temperature":9})");
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"]["param"], "temperature");
  EXPECT_EQ(rc->request("POST", "/v1/completions", "{nope")->status, 400);
  // Fields of the wrong type are the cell's 400s, never the router's crash.
  for (const char* body : {R"({"prompt":"x","stream":"yes"})", R"({"prompt":{},"n":"two"})", R"({"prompt":"x","seed":"s"})",
                           R"({"messages":7})", R"({"prompt":"x","continuation":5,"stream":true,"seed":1})"}) {
    Result<client::Response> r = rc->request("POST", "/v1/completions", body);
    ASSERT_TRUE(r.ok()) << body;
    EXPECT_EQ(r->status, 400) << body << " " << r->body;
  }
  EXPECT_EQ(rc->request("GET", "/health")->status, 200);
  EXPECT_EQ(rc->request("POST", "/admin/cells", R"({"url":"ftp://x"})")->status, 400);

  // Prefix affinity: prompts sharing a long prefix land on one cell.
  const std::string prefix(700, 'a');
  json before = get_json(*rc, "/admin/cells");
  for (int i = 0; i < 8; ++i) {
    json p = {{"prompt", prefix + " story " + std::to_string(i)}, {"max_tokens", 2}};
    ASSERT_EQ(rc->request("POST", "/v1/completions", p.dump())->status, 200);
  }
  json after = get_json(*rc, "/admin/cells");
  std::vector<int64_t> got;
  for (size_t i = 0; i < after["cells"].size(); ++i)
    got.push_back(after["cells"][i]["requests"].get<int64_t>() - before["cells"][i]["requests"].get<int64_t>());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int64_t>{0, 8}));

  // A cell leaving (SIGTERM) is dropped from the pool; requests go to the other.
  EXPECT_EQ(a.stop(SIGTERM), 0);
  EXPECT_EQ(cell_state(*rc, a.url()), "");
  EXPECT_EQ(rc->request("POST", "/v1/completions", greedy.dump())->status, 200);
  json m = get_json(*rc, "/admin/cells");
  ASSERT_EQ(m["cells"].size(), 1u);
  EXPECT_NE(metric_line(*rc, "tokenhive_router_requests_total{endpoint=\"completions\",outcome=\"ok\"}"), "");
  EXPECT_EQ(router.stop(SIGTERM), 0);
}

TEST(RouterRollingRestart, EveryCellRestartedUnderLoadWithNoFailedRequest) {
  ServeProcess router("router", {}, 30);
  ASSERT_TRUE(router.ok()) << router.log();
  auto rc = client_for(router.url());
  std::vector<std::unique_ptr<ServeProcess>> cells;
  for (int i = 0; i < 3; ++i) {
    cells.push_back(std::make_unique<ServeProcess>(router_cell_args({"--join", router.url()})));
    ASSERT_TRUE(cells.back()->ok()) << cells.back()->log();
    ASSERT_TRUE(wait_state(*rc, cells.back()->url(), "alive"));
  }
  // The greedy answers, before anything restarts.
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily and Ben", "One day, a bird"};
  std::vector<std::string> expected;
  for (const std::string& p : prompts) {
    Result<client::Response> r =
        rc->request("POST", "/v1/completions", json{{"prompt", p}, {"max_tokens", 48}, {"temperature", 0}}.dump());
    ASSERT_TRUE(r.ok() && r->status == 200);
    expected.push_back(json::parse(r->body)["choices"][0]["text"]);
  }

  std::atomic<bool> stop{false};
  std::atomic<int64_t> done{0}, failed{0};
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> load;
  for (int t = 0; t < 8; ++t) {
    load.emplace_back([&, t] {
      auto c = client_for(router.url());
      for (int i = 0; !stop.load(); ++i) {
        const size_t k = static_cast<size_t>(t + i) % prompts.size();
        json body = {{"prompt", prompts[k]}, {"max_tokens", 48}, {"temperature", 0}};
        std::string text, error;
        if ((t + i) % 3 == 0) {
          Result<client::Response> r = c->request("POST", "/v1/completions", body.dump());
          if (!r.ok()) error = r.message();
          else if (r->status != 200) error = r->body;
          else text = json::parse(r->body)["choices"][0]["text"];
        } else {
          body["stream"] = true;
          Outcome o = stream(*c, "/v1/completions", body);
          if (!o.ok) error = o.error.empty() ? "incomplete stream" : o.error;
          text = o.text;
        }
        if (error.empty() && text != expected[k]) error = "wrong text: " + text;
        (error.empty() ? done : failed).fetch_add(1);
        if (!error.empty()) {
          std::lock_guard<std::mutex> l(mu);
          failures.push_back(error);
        }
      }
    });
  }
  for (size_t i = 0; i < cells.size(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const std::string old_url = cells[i]->url();
    EXPECT_EQ(cells[i]->stop(SIGTERM, 60), 0) << cells[i]->log();
    cells[i] = std::make_unique<ServeProcess>(router_cell_args({"--join", router.url()}));
    ASSERT_TRUE(cells[i]->ok()) << cells[i]->log();
    ASSERT_TRUE(wait_state(*rc, cells[i]->url(), "alive"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  for (std::thread& t : load) t.join();
  std::printf("[ rolling restart ] %lld requests, %lld failed\n", static_cast<long long>(done.load()),
              static_cast<long long>(failed.load()));
  EXPECT_EQ(failed.load(), 0) << (failures.empty() ? "" : failures.front());
  EXPECT_GT(done.load(), 20);
  EXPECT_EQ(get_json(*rc, "/admin/cells")["cells"].size(), 3u);
}

// Two routers on one etcd: a cell that joins through one is used by the other, and killing a
// router loses no registration (each cell holds its own lease).
TEST(RouterEtcd, TwoRoutersShareCellsAndLosingARouterLosesNoRegistration) {
  if (!test::EtcdProcess::available()) GTEST_SKIP() << "no etcd at " << test::EtcdProcess::binary();
  test::EtcdProcess etcd;
  ASSERT_TRUE(etcd.ok()) << etcd.log();
  const std::string discovery = "etcd://" + etcd.endpoint().substr(std::string("http://").size());
  auto a = std::make_unique<ServeProcess>("router", std::vector<std::string>{"--discovery", discovery}, 30);
  ServeProcess b("router", {"--discovery", discovery}, 30);
  ASSERT_TRUE(a->ok() && b.ok()) << a->log() << b.log();
  ServeProcess x(router_cell_args({"--join", a->url()}));          // through router A
  ServeProcess y(router_cell_args({"--discovery", discovery}));    // on etcd directly
  ASSERT_TRUE(x.ok() && y.ok()) << x.log() << y.log();
  auto ac = client_for(a->url());
  auto bc = client_for(b.url());
  for (client::HttpClient* r : {ac.get(), bc.get()}) {
    ASSERT_TRUE(wait_state(*r, x.url(), "alive")) << b.log() << x.log();
    ASSERT_TRUE(wait_state(*r, y.url(), "alive")) << b.log() << y.log();
  }
  // Y drains: router B can only use X, which registered through A.
  auto yc = client_for(y.url());
  ASSERT_EQ(yc->request("POST", "/admin/drain")->status, 200);
  ASSERT_TRUE(wait_state(*bc, y.url(), "draining"));
  for (int i = 0; i < 3; ++i) {
    Result<client::Response> r = bc->request("POST", "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":4})");
    ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.message());
  }
  json cells = get_json(*bc, "/admin/cells");
  for (const json& c : cells["cells"])
    if (c["url"] == x.url()) {
      EXPECT_EQ(c["requests"], 3);
    }

  // Router A dies; the registrations outlive it (well past the lease TTL of 2 s).
  a->stop(SIGKILL);
  a.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  EXPECT_EQ(cell_state(*bc, x.url()), "alive");
  ServeProcess c("router", {"--discovery", discovery}, 30);  // a router started now finds both
  ASSERT_TRUE(c.ok()) << c.log();
  auto cc = client_for(c.url());
  EXPECT_TRUE(wait_state(*cc, x.url(), "alive"));
  EXPECT_TRUE(wait_state(*cc, y.url(), "draining"));
  Result<client::Response> r = cc->request("POST", "/v1/completions", R"({"prompt":"Once","max_tokens":4})");
  EXPECT_TRUE(r.ok() && r->status == 200);

  // A cell that leaves (SIGTERM) revokes its lease: every router drops it at once.
  EXPECT_EQ(x.stop(SIGTERM), 0);
  EXPECT_TRUE(wait_state(*bc, x.url(), "", 3));
  EXPECT_TRUE(wait_state(*cc, x.url(), "", 3));
}

// --- #15: what no client and no cell can do to the router ---------------------------

// A body of `depth` nested arrays, as a prompt: 200 KB is 100,000 levels.
std::string deep_body(size_t depth) {
  return "{\"prompt\":" + std::string(depth, '[') + std::string(depth, ']') + ",\"max_tokens\":2}";
}

TEST(RouterHardening, ADeepBodyIsA400AndTheRouterKeepsServing) {
  ServeProcess cell(router_cell_args());
  ASSERT_TRUE(cell.ok()) << cell.log();
  ServeProcess router("router", {"--cell", cell.url()}, 30);
  ASSERT_TRUE(router.ok()) << router.log();
  auto rc = client_for(router.url());
  ASSERT_TRUE(wait_state(*rc, cell.url(), "alive")) << router.log();

  // One client sends deep bodies (100,000 levels once killed the router: exit 139) while
  // another's ordinary requests go on.
  std::atomic<bool> stop{false};
  std::atomic<int> served{0}, failed{0};
  std::thread other([&] {
    auto c = client_for(router.url());
    while (!stop.load()) {
      Result<client::Response> r = c->request("POST", "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":2})");
      (r.ok() && r->status == 200 ? served : failed).fetch_add(1);
    }
  });
  for (size_t depth : {size_t{70'000}, size_t{100'000}, size_t{100'000}, size_t{400'000}}) {
    Result<client::Response> r = rc->request("POST", "/v1/completions", deep_body(depth));
    EXPECT_TRUE(r.ok()) << depth << ": " << r.message() << "\n" << router.log();
    if (!r.ok()) break;  // the router died (as it did before #15): stop, join below
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_NE(r->body.find("nested deeper than 64"), std::string::npos) << r->body;
  }
  Result<client::Response> chat = rc->request("POST", "/v1/chat/completions", "{\"messages\":" + std::string(200'000, '{'));
  EXPECT_TRUE(chat.ok()) << chat.message();
  if (chat.ok()) {
    EXPECT_EQ(chat->status, 400);
  }
  const Clock::time_point until = Clock::now() + std::chrono::seconds(30);
  while (served.load() < 3 && failed.load() == 0 && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  stop.store(true);
  other.join();
  EXPECT_GE(served.load(), 3);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(rc->request("GET", "/health")->status, 200);
  EXPECT_EQ(router.stop(SIGTERM), 0) << router.log();
}

// A cell that answers heartbeats well and requests badly, in this process.
class FakeCell {
 public:
  enum class Mode { kDeepChunk, kStatus999, kNotJson, kRateLimited, kDiesAfterFinish };
  explicit FakeCell(Mode mode) : mode_(mode) {
    http::HttpServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    server_ = std::make_unique<http::HttpServer>(o);
    server_->route("GET", "/admin/load", [](const http::HttpRequest&, http::ResponseWriter w) {
      w.send(http::json_response(200, json{{"running", 0}, {"waiting", 0}, {"kv_free_blocks", 100},
                                           {"kv_total_blocks", 100}, {"tokens_per_second", 0}, {"ready", true}}));
    });
    for (const char* path : {"/v1/completions", "/v1/chat/completions"})
      server_->route("POST", path, [this](const http::HttpRequest&, http::ResponseWriter w) { answer(w); });
    ok_ = server_->start().ok();
  }
  bool ok() const { return ok_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  int hits() const { return hits_.load(); }

 private:
  void answer(http::ResponseWriter& w) {
    hits_.fetch_add(1);
    switch (mode_) {
      case Mode::kDeepChunk: {
        w.start_sse();
        w.send_event("{\"choices\":" + std::string(200'000, '[') + std::string(200'000, ']') + "}");
        w.send_event("[DONE]");
        w.end();
        return;
      }
      case Mode::kStatus999: {
        http::HttpResponse r = http::json_response(200, json{{"choices", json::array()}});
        r.status = 999;
        w.send(std::move(r));
        return;
      }
      case Mode::kNotJson: w.send(http::text_response(200, "<html>not a cell</html>", "text/html")); return;
      case Mode::kDiesAfterFinish: {  // both choices' last tokens, then the stream ends: no usage, no [DONE]
        w.start_sse();
        for (int i = 0; i < 2; ++i)
          w.send_event(json{{"id", "cmpl-f"}, {"object", "text_completion"}, {"created", 7}, {"model", "fake"},
                            {"choices", {{{"index", i}, {"text", "Hi"}, {"token_ids", {5, 6}}, {"prompt_token_ids", {1, 2, 3}},
                                          {"finish_reason", "length"}}}}, {"usage", nullptr}}.dump());
        w.end();
        return;
      }
      case Mode::kRateLimited: {
        http::HttpResponse r = http::error_response(429, "rate limit: 1 request a minute for this key");
        r.set_header("Retry-After", "7");
        w.send(std::move(r));
        return;
      }
    }
  }

  Mode mode_;
  std::unique_ptr<http::HttpServer> server_;
  std::atomic<int> hits_{0};
  bool ok_ = false;
};

// A prompt the prefix policy sends to `want` rather than `other` (both idle): found with
// the router's own functions, so the fake cell is tried first.
std::string prompt_for(const std::string& want, const std::string& other, int from = 0) {
  auto policy = cluster::make_routing_policy("prefix", cluster::PolicyOptions{});
  for (int i = from; i < from + 1000; ++i) {
    // The key is the 8th 64-byte block's chained hash: what varies comes first.
    const std::string prompt = std::to_string(i) + " Once upon a time " + std::string(600, 'a');
    Result<cluster::ProxyRequest> q = cluster::inspect_request(cluster::ProxyEndpoint::kCompletions,
                                                               json{{"prompt", prompt}}.dump(), 1);
    std::vector<cluster::CellView> views(2);
    views[0].id = want;
    views[1].id = other;
    views[0].eligible = views[1].eligible = true;
    if (q.ok() && (*policy)->pick(q->route, views) == std::optional<size_t>(0)) return prompt;
  }
  return {};
}

TEST(RouterHardening, ACellThatAnswersBadlyFailsAndTheRequestEndsOnARealCell) {
  ServeProcess real(router_cell_args());
  ASSERT_TRUE(real.ok()) << real.log();
  for (FakeCell::Mode mode : {FakeCell::Mode::kDeepChunk, FakeCell::Mode::kStatus999, FakeCell::Mode::kNotJson}) {
    SCOPED_TRACE(static_cast<int>(mode));
    FakeCell fake(mode);
    ASSERT_TRUE(fake.ok());
    ServeProcess router("router", {"--cell", fake.url(), "--cell", real.url()}, 30);
    ASSERT_TRUE(router.ok()) << router.log();
    auto rc = client_for(router.url());
    ASSERT_TRUE(wait_state(*rc, fake.url(), "alive")) << router.log();
    ASSERT_TRUE(wait_state(*rc, real.url(), "alive")) << router.log();
    for (int i = 0; i < 3; ++i) {
      const std::string prompt = prompt_for(fake.url(), real.url(), i * 1000);
      ASSERT_FALSE(prompt.empty());
      json body = {{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}};
      if (mode == FakeCell::Mode::kDeepChunk) {
        body["stream"] = true;
        Outcome o = stream(*rc, "/v1/completions", body);
        EXPECT_TRUE(o.ok) << o.error << "\n" << router.log();
        EXPECT_FALSE(o.text.empty());
      } else {
        Result<client::Response> r = rc->request("POST", "/v1/completions", body.dump());
        ASSERT_TRUE(r.ok()) << r.message() << "\n" << router.log();
        EXPECT_EQ(r->status, 200) << r->body;
        json j = json::parse(r->body, nullptr, false);
        ASSERT_TRUE(j.is_object()) << r->body;
        EXPECT_EQ(j["choices"].size(), 1u) << r->body;
      }
    }
    EXPECT_EQ(fake.hits(), 3);  // each request tried the fake first, and it failed each
    EXPECT_GE(metric_value(*rc, "tokenhive_router_invalid_answers_total"), 3.0);
    const json cells = get_json(*rc, "/admin/cells");  // named: a range-for over a temporary's member dangles
    for (const json& c : cells["cells"]) EXPECT_EQ(c["invalid_answers"], c["url"] == fake.url() ? 3 : 0) << c.dump();
    EXPECT_EQ(router.stop(SIGTERM), 0) << router.log();
  }
}

// --- #22: streams of several choices move choice by choice -----------------------------

// What one stream gave, per choice index.
struct Choices {
  std::map<int, std::string> text, finish;
  std::map<int, std::vector<int32_t>> ids;
  std::map<int, std::vector<int64_t>> offsets;  // logprobs.text_offset
  std::map<int, size_t> logprobs;               // logprobs.tokens entries
  std::map<int, int> roles;
  json usage;
  int done = 0;
  std::string error;
};

Choices stream_choices(client::HttpClient& c, const std::string& path, const json& body, std::atomic<int64_t>* tokens = nullptr) {
  Choices o;
  Result<client::Response> r = c.stream_events("POST", path, body.dump(), [&](const client::SseEvent& e) {
    if (e.data == "[DONE]") {
      ++o.done;
      return true;
    }
    json j = json::parse(e.data, nullptr, false);
    if (!j.is_object() || j.contains("error")) {
      o.error = e.data;
      return true;
    }
    if (j.contains("usage") && !j["usage"].is_null()) o.usage = j["usage"];
    for (const json& ch : j["choices"]) {
      const int i = ch["index"];
      o.text[i] += ch.contains("delta") ? ch["delta"].value("content", "") : ch.value("text", "");
      if (ch.contains("delta") && ch["delta"].contains("role")) ++o.roles[i];
      for (const json& id : ch.value("token_ids", json::array())) o.ids[i].push_back(id.get<int32_t>());
      if (tokens) tokens->fetch_add(static_cast<int64_t>(ch.value("token_ids", json::array()).size()));
      if (ch.contains("logprobs") && ch["logprobs"].is_object()) {
        o.logprobs[i] += ch["logprobs"]["tokens"].size();
        for (const json& t : ch["logprobs"]["text_offset"]) o.offsets[i].push_back(t.get<int64_t>());
      }
      if (!ch["finish_reason"].is_null()) o.finish[i] = ch["finish_reason"];
    }
    return true;
  });
  if (!r.ok()) o.error = r.message();
  else if (r->status != 200) o.error = r->body;
  return o;
}

// Two prompts, two choices each, seeded: the cell serving them killed mid-stream; each choice
// goes on alone on the other cell, token-identical, with its logprobs (no gap: every token's
// went out with the token) and text offsets, and the router's usage chunk is the cell's.
TEST(RouterMigration, SeveralChoicesMoveOneByOneWhenTheirCellDies) {
  ServeProcess a(router_cell_args()), b(router_cell_args());
  ASSERT_TRUE(a.ok()) << a.log();
  ASSERT_TRUE(b.ok()) << b.log();
  ServeProcess router("router", {"--cell", a.url(), "--cell", b.url()}, 30);
  ASSERT_TRUE(router.ok()) << router.log();
  auto rc = client_for(router.url());
  ASSERT_TRUE(wait_state(*rc, a.url(), "alive")) << router.log();
  ASSERT_TRUE(wait_state(*rc, b.url(), "alive")) << router.log();
  const json body = {{"prompt", {"Once upon a time", "The little dog"}}, {"n", 2}, {"max_tokens", 300},
                     {"ignore_eos", true}, {"temperature", 0.9}, {"seed", 21}, {"stream", true},
                     {"return_token_ids", true}, {"logprobs", 1}, {"stream_options", {{"include_usage", true}}}};
  Choices clean = stream_choices(*rc, "/v1/completions", body);
  ASSERT_TRUE(clean.error.empty()) << clean.error;
  ASSERT_EQ(clean.ids.size(), 4u);
  ASSERT_TRUE(clean.usage.is_object());

  std::atomic<int64_t> tokens{0};
  Choices moved;
  std::thread run([&] { moved = stream_choices(*rc, "/v1/completions", body, &tokens); });
  const Clock::time_point until = Clock::now() + std::chrono::seconds(30);
  while (tokens.load() < 4 * 20 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::string killed;
  const json cells = get_json(*rc, "/admin/cells");
  for (ServeProcess* cell : {&a, &b})
    for (const json& c : cells["cells"])
      if (c["url"] == cell->url() && c["requests_in_flight"].get<int64_t>() > 0 && killed.empty()) {
        ::kill(cell->pid(), SIGKILL);
        killed = cell->url();
      }
  run.join();
  ASSERT_FALSE(killed.empty());
  EXPECT_TRUE(moved.error.empty()) << moved.error << "\n" << router.log();
  EXPECT_EQ(moved.done, 1);
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(moved.ids[i], clean.ids[i]);
    EXPECT_EQ(moved.text[i], clean.text[i]);
    EXPECT_EQ(moved.finish[i], "length");
    EXPECT_EQ(moved.logprobs[i], moved.ids[i].size());
    EXPECT_EQ(moved.offsets[i], clean.offsets[i]);
  }
  EXPECT_EQ(moved.usage["prompt_tokens"], clean.usage["prompt_tokens"]);
  EXPECT_EQ(moved.usage["completion_tokens"], clean.usage["completion_tokens"]);
  EXPECT_EQ(moved.usage["total_tokens"], clean.usage["total_tokens"]);
  EXPECT_EQ(metric_value(*rc, "tokenhive_router_migrations_total"), 4.0) << router.log();  // one per choice
}

// Chat with n = 3: the role chunk once per choice across the move.
TEST(RouterMigration, ChatChoicesMoveAndKeepOneRoleChunkEach) {
  ServeProcess a(router_cell_args()), b(router_cell_args());
  ASSERT_TRUE(a.ok()) << a.log();
  ASSERT_TRUE(b.ok()) << b.log();
  ServeProcess router("router", {"--cell", a.url(), "--cell", b.url()}, 30);
  ASSERT_TRUE(router.ok()) << router.log();
  auto rc = client_for(router.url());
  ASSERT_TRUE(wait_state(*rc, a.url(), "alive")) << router.log();
  ASSERT_TRUE(wait_state(*rc, b.url(), "alive")) << router.log();
  const json body = {{"messages", {{{"role", "user"}, {"content", "Tell me about a cat"}}}}, {"n", 3}, {"max_tokens", 300},
                     {"ignore_eos", true}, {"temperature", 0.9}, {"seed", 5}, {"stream", true}, {"return_token_ids", true}};
  Choices clean = stream_choices(*rc, "/v1/chat/completions", body);
  ASSERT_TRUE(clean.error.empty()) << clean.error;
  std::atomic<int64_t> tokens{0};
  Choices moved;
  std::thread run([&] { moved = stream_choices(*rc, "/v1/chat/completions", body, &tokens); });
  const Clock::time_point until = Clock::now() + std::chrono::seconds(30);
  while (tokens.load() < 3 * 20 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  bool killed = false;
  const json cells = get_json(*rc, "/admin/cells");
  for (ServeProcess* cell : {&a, &b})
    for (const json& c : cells["cells"])
      if (c["url"] == cell->url() && c["requests_in_flight"].get<int64_t>() > 0 && !killed) {
        ::kill(cell->pid(), SIGKILL);
        killed = true;
      }
  run.join();
  ASSERT_TRUE(killed);
  EXPECT_TRUE(moved.error.empty()) << moved.error << "\n" << router.log();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(moved.ids[i], clean.ids[i]) << i;
    EXPECT_EQ(moved.text[i], clean.text[i]) << i;
    EXPECT_EQ(moved.roles[i], 1) << i;
  }
  EXPECT_EQ(metric_value(*rc, "tokenhive_router_migrations_total"), 3.0) << router.log();
}

// A cell that dies after every choice's finish and before its usage chunk and [DONE]: the
// router makes the usage chunk from what it saw, then [DONE].
TEST(RouterMigration, TheUsageChunkIsRebuiltWhenTheCellDiesAfterTheFinish) {
  FakeCell fake(FakeCell::Mode::kDiesAfterFinish);
  ASSERT_TRUE(fake.ok());
  ServeProcess router("router", {"--cell", fake.url()}, 30);
  ASSERT_TRUE(router.ok()) << router.log();
  auto rc = client_for(router.url());
  ASSERT_TRUE(wait_state(*rc, fake.url(), "alive")) << router.log();
  const json body = {{"prompt", "x"}, {"n", 2}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  Choices o = stream_choices(*rc, "/v1/completions", body);
  EXPECT_TRUE(o.error.empty()) << o.error;
  EXPECT_EQ(o.done, 1);
  EXPECT_EQ(o.text[0], "Hi");
  EXPECT_EQ(o.text[1], "Hi");
  EXPECT_EQ(o.usage, json::parse(R"({"prompt_tokens":3,"completion_tokens":4,"total_tokens":7})")) << router.log();
  EXPECT_EQ(fake.hits(), 1);
}

TEST(RouterHardening, ACellsRateLimitReachesTheClientWithItsRetryAfter) {
  FakeCell limited(FakeCell::Mode::kRateLimited);
  ASSERT_TRUE(limited.ok());
  ServeProcess real(router_cell_args());
  ASSERT_TRUE(real.ok()) << real.log();
  ServeProcess router("router", {"--cell", limited.url(), "--cell", real.url()}, 30);
  ASSERT_TRUE(router.ok()) << router.log();
  auto rc = client_for(router.url());
  ASSERT_TRUE(wait_state(*rc, limited.url(), "alive")) << router.log();
  ASSERT_TRUE(wait_state(*rc, real.url(), "alive")) << router.log();
  const std::string prompt = prompt_for(limited.url(), real.url());
  ASSERT_FALSE(prompt.empty());
  for (bool streamed : {false, true}) {
    const json body = {{"prompt", prompt}, {"max_tokens", 2}, {"stream", streamed}};
    Result<client::Response> r = rc->request("POST", "/v1/completions", body.dump());
    ASSERT_TRUE(r.ok()) << r.message();
    // The key's limit is the client's answer: not retried on the real cell, not a 503.
    EXPECT_EQ(r->status, 429) << r->body;
    EXPECT_EQ(r->header("retry-after").value_or(""), "7");
    EXPECT_NE(r->body.find("rate limit"), std::string::npos) << r->body;
  }
  EXPECT_EQ(limited.hits(), 2);
  EXPECT_EQ(metric_value(*rc, "tokenhive_router_retries_total"), 0.0);
  EXPECT_EQ(router.stop(SIGTERM), 0) << router.log();
}

TEST(RouterHardening, AdminCallsNeedATokenUnlessTheListenerIsLoopback) {
  const std::string join = R"({"url":"http://127.0.0.1:9"})";
  {
    // Listening on every address with no token: admin calls are refused, and the log says so.
    ServeProcess open("router", {"--host", "0.0.0.0"}, 30);
    ASSERT_TRUE(open.ok()) << open.log();
    EXPECT_NE(open.log().find("admin calls (POST /admin/*) are refused"), std::string::npos) << open.log();
    auto c = client_for(open.url());
    for (const char* path : {"/admin/cells", "/admin/cells/leave"}) {
      Result<client::Response> r = c->request("POST", path, join);
      ASSERT_TRUE(r.ok()) << r.message();
      EXPECT_EQ(r->status, 403) << path << " " << r->body;
      EXPECT_NE(r->body.find("--admin-token"), std::string::npos) << r->body;
    }
    EXPECT_EQ(get_json(*c, "/admin/cells")["cells"].size(), 0u);
    EXPECT_EQ(open.stop(SIGTERM), 0);
  }
  {
    // With a token: allowed with it, 401 without.
    ServeProcess tok("router", {"--host", "0.0.0.0", "--admin-token", "s3cret"}, 30);
    ASSERT_TRUE(tok.ok()) << tok.log();
    auto c = client_for(tok.url());
    EXPECT_EQ(c->request("POST", "/admin/cells", join)->status, 401);
    Result<client::Response> r = c->request("POST", "/admin/cells", join, {{"Authorization", "Bearer s3cret"}});
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(get_json(*c, "/admin/cells")["cells"].size(), 1u);
    EXPECT_EQ(tok.stop(SIGTERM), 0);
  }
  {
    // Loopback only (the default host): open, as the cells' --join needs.
    ServeProcess local("router", {}, 30);
    ASSERT_TRUE(local.ok()) << local.log();
    EXPECT_NE(local.log().find("need a loopback client"), std::string::npos) << local.log();
    auto c = client_for(local.url());
    EXPECT_EQ(c->request("POST", "/admin/cells", join)->status, 200);
    EXPECT_EQ(local.stop(SIGTERM), 0);
  }
}

}  // namespace
}  // namespace th
