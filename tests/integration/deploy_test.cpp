// deploy/ checked with the tools that run it: `systemd-analyze verify` on the units,
// `promtool check` on the alert rules and scrape config, and a real Prometheus (Debian's
// prometheus) scraping a running cell and router with deploy/'s alert rules loaded,
// answering PromQL over the scraped series, every expression of the Grafana dashboard too.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "client/http_client.h"
#include "etcd_process.h"
#include "http_test_client.h"
#include "run_process.h"
#include "serve_process.h"
#include "test_util.h"

namespace th {
namespace {

using nlohmann::json;
using test::ServeProcess;

using test::stories;
bool executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

TEST(Deploy, SystemdUnitsVerify) {
  if (!executable("/usr/bin/systemd-analyze")) GTEST_SKIP() << "systemd-analyze is missing (Debian's systemd)";
  for (const char* unit : {"tokenhive-serve.service", "tokenhive-router.service"}) {
    // verify checks that ExecStart's binary exists: the built one stands in for /usr/local/bin's.
    const std::string dir = test::temp_path("units");
    std::filesystem::create_directories(dir);
    std::string text = test::slurp(test::source_path(std::string("deploy/systemd/") + unit));
    ASSERT_FALSE(text.empty()) << unit;
    text = std::regex_replace(text, std::regex("/usr/local/bin/tokenhive"), test::binary_path());
    const std::string path = dir + "/" + unit;
    std::ofstream(path) << text;
    test::ProcessResult r = test::run_process({"/usr/bin/systemd-analyze", "verify", path}, 60);
    EXPECT_EQ(r.exit_code, 0) << unit << "\n" << r.out << r.err;
    EXPECT_EQ(r.err.find(unit), std::string::npos) << r.err;  // no warning about our unit
    EXPECT_NE(text.find("Type=notify"), std::string::npos) << unit;
    std::filesystem::remove_all(dir);
  }
}

// Type=notify as systemd runs it: $NOTIFY_SOCKET names a datagram socket; READY=1 comes once
// the verb is ready, STOPPING=1 when SIGTERM starts the drain.
TEST(Deploy, ServeAndRouterNotifySystemd) {
  const std::string name = test::temp_path("notify.sock");
  ::unlink(name.c_str());
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(name.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, name.data(), name.size());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  auto next = [fd] {
    char buf[256];
    for (int i = 0; i < 500; ++i) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) return std::string(buf, static_cast<size_t>(n));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::string();
  };
  ::setenv("NOTIFY_SOCKET", name.c_str(), 1);  // the children inherit it
  {
    ServeProcess cell({"-m", stories(), "-t", "1", "--kv-cache-mib", "16"});
    ServeProcess router("router", {"--cell", cell.url()}, 30);
    ::unsetenv("NOTIFY_SOCKET");
    ASSERT_TRUE(cell.ok()) << cell.log();
    ASSERT_TRUE(router.ok()) << router.log();
    EXPECT_EQ(next(), "READY=1");
    EXPECT_EQ(next(), "READY=1");
    EXPECT_EQ(cell.stop(), 0);
    EXPECT_EQ(next(), "STOPPING=1");
    EXPECT_EQ(router.stop(), 0);
    EXPECT_EQ(next(), "STOPPING=1");
  }
  ::unsetenv("NOTIFY_SOCKET");
  ::close(fd);
  ::unlink(name.c_str());
}

TEST(Deploy, AlertRulesAndScrapeConfigPassPromtool) {
  if (!executable("/usr/bin/promtool")) GTEST_SKIP() << "promtool is missing (Debian's prometheus)";
  test::ProcessResult rules =
      test::run_process({"/usr/bin/promtool", "check", "rules", test::source_path("deploy/prometheus/tokenhive-alerts.yml")}, 60);
  EXPECT_EQ(rules.exit_code, 0) << rules.out << rules.err;
  EXPECT_NE(rules.out.find("SUCCESS: 10 rules found"), std::string::npos) << rules.out;
  test::ProcessResult config =
      test::run_process({"/usr/bin/promtool", "check", "config", test::source_path("deploy/prometheus/prometheus.yml")}, 60);
  EXPECT_EQ(config.exit_code, 0) << config.out << config.err;
}

std::string url_encode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += static_cast<char>(c);
    else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

// A `prometheus` child on an ephemeral port of 127.0.0.1, its storage in a temp folder.
class PrometheusProcess {
 public:
  PrometheusProcess(const std::string& config) {
    dir_ = test::temp_path("prometheus");
    std::filesystem::create_directories(dir_);
    port_ = test::EtcdProcess::free_port();
    std::vector<std::string> argv = {"/usr/bin/prometheus", "--config.file=" + config, "--storage.tsdb.path=" + dir_ + "/data",
                                     "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=warn"};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, (dir_ + "/log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~PrometheusProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  int port() const { return port_; }
  std::string log() const { return test::slurp(dir_ + "/log"); }
  /// @brief GET PATH: the body as JSON; null while prometheus is not up (yet).
  json get(const std::string& path) const {
    // No retries: until its storage is open prometheus answers 503, which the client would
    // retry with backoff (5 s); the test polls every 100 ms instead.
    client::HttpClientOptions o;
    o.retry.max_attempts = 1;
    Result<std::unique_ptr<client::HttpClient>> c = client::HttpClient::create("http://127.0.0.1:" + std::to_string(port_), o);
    if (!c.ok()) return json();
    Result<client::Response> r = (*c)->request("GET", path);
    return r.ok() ? json::parse(r->body, nullptr, false) : json();
  }
  /// @brief GET /api/v1/query?query=Q.
  json query(const std::string& q) const { return get("/api/v1/query?query=" + url_encode(q)); }

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// The single value of an instant vector's first sample; NaN when there is none.
double first_value(const json& answer) {
  if (!answer.is_object() || answer.value("status", "") != "success") return NAN;
  const json& result = answer["data"]["result"];
  if (!result.is_array() || result.empty()) return NAN;
  return std::stod(result[0]["value"][1].get<std::string>());
}

TEST(Deploy, PrometheusScrapesACellAndARouter) {
  if (!executable("/usr/bin/prometheus")) GTEST_SKIP() << "prometheus is missing (Debian's prometheus)";
#ifdef TH_SANITIZED_TESTS
  // Mostly Prometheus's own first-scrape wait, holding one of CI's two test slots; /metrics
  // itself runs sanitized in ServeApi.MetricsUnderLoadPassPromtool.
  GTEST_SKIP() << "the Prometheus test runs in the release stage only";
#endif
  ServeProcess cell({"-m", stories(), "-t", "1", "--kv-cache-mib", "16"});
  ASSERT_TRUE(cell.ok()) << cell.log();
  ServeProcess router("router", {"--cell", cell.url()}, 30);
  ASSERT_TRUE(router.ok()) << router.log();
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(test::request(router.port(), "POST", "/v1/completions", R"({"prompt": "Once", "max_tokens": 4})").status, 200);

  // deploy/'s scrape config with these targets and a 250 ms interval; its alert rules loaded.
  std::string config = test::slurp(test::source_path("deploy/prometheus/prometheus.yml"));
  ASSERT_FALSE(config.empty());
  config = std::regex_replace(config, std::regex("scrape_interval: 5s"), "scrape_interval: 250ms");
  config = std::regex_replace(config, std::regex(R"re(\["10\.0\.0\.7:8080", "10\.0\.0\.8:8080"\])re"),
                              "[\"127.0.0.1:" + std::to_string(cell.port()) + "\"]");
  config = std::regex_replace(config, std::regex(R"re(\["10\.0\.0\.2:8000"\])re"), "[\"127.0.0.1:" + std::to_string(router.port()) + "\"]");
  config = std::regex_replace(config, std::regex("- tokenhive-alerts.yml"),
                              "- " + test::source_path("deploy/prometheus/tokenhive-alerts.yml"));
  ASSERT_NE(config.find(std::to_string(router.port())), std::string::npos) << config;
  const std::string config_path = test::temp_path("prometheus.yml");
  std::ofstream(config_path) << config;
  PrometheusProcess prom(config_path);

  // Both scraped, and the series there: the requests the router finished and the cell ran.
  // About 5 s: prometheus' discovery manager hands the scrapers their first targets after its
  // 5-s update throttle (not a flag in 2.42); the scrapes themselves are every 250 ms.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  double up = 0, routed = 0, ran = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    up = first_value(prom.query("sum(up{job=~\"tokenhive-cell|tokenhive-router\"})"));
    routed = first_value(prom.query("sum(tokenhive_router_requests_total{job=\"tokenhive-router\", outcome=\"ok\"})"));
    ran = first_value(prom.query("sum(tokenhive_requests_total{job=\"tokenhive-cell\"})"));
    if (up == 2 && routed == 3 && ran == 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(up, 2) << prom.log();
  EXPECT_EQ(routed, 3) << prom.log();
  EXPECT_EQ(ran, 3) << prom.log();
  EXPECT_EQ(first_value(prom.query("tokenhive_router_cells{job=\"tokenhive-router\", state=\"alive\"}")), 1);

  // The alert rules are loaded and evaluate without error.
  const json r = prom.get("/api/v1/rules");
  int n_rules = 0;
  for (const json& g : r["data"]["groups"])
    for (const json& rule : g["rules"]) {
      ++n_rules;
      EXPECT_NE(rule.value("health", ""), "err") << rule.dump();
    }
  EXPECT_EQ(n_rules, 10) << r.dump();

  // Every expression of the Grafana dashboard parses and evaluates over these series.
  const json dash = json::parse(test::slurp(test::source_path("deploy/grafana/tokenhive-dashboard.json")));
  int exprs = 0;
  for (const json& panel : dash["panels"]) {
    if (!panel.contains("targets")) continue;
    for (const json& t : panel["targets"]) {
      std::string e = t["expr"];
      e = std::regex_replace(e, std::regex(R"(\$cell_job)"), "tokenhive-cell");
      e = std::regex_replace(e, std::regex(R"(\$router_job)"), "tokenhive-router");
      e = std::regex_replace(e, std::regex(R"(\$instance)"), ".*");
      const json a = prom.query(e);
      EXPECT_EQ(a.value("status", ""), "success") << panel["title"] << ": " << e << "\n" << a.dump();
      ++exprs;
    }
  }
  EXPECT_GE(exprs, 20);
  ::unlink(config_path.c_str());
}

}  // namespace
}  // namespace th
