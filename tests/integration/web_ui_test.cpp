// The web UI (web/, served from the binary) in a real browser: tests/browser/web_ui.mjs drives
// Debian's chromium through playwright-core, one launch for every check: the playground
// (API key, streamed chat, stop cancels on the server, errors, the conversation kept), the
// dashboard under `bench serve` load, the router's cluster view seeing a cell kill -9'd,
// axe-core on each page, no request to another origin. Screenshots: build/web_ui_screenshots/.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http/static_asset.h"
#include "run_process.h"
#include "serve_process.h"
#include "test_util.h"

namespace th {
namespace {

using test::ServeProcess;

using test::stories;

// What the browser test needs; empty when all is there, else why it cannot run.
std::string browser_missing() {
  if (http::embedded_assets().empty()) return "the web UI was not built (no node or node_modules/esbuild at build time)";
  for (const char* pkg : {"playwright-core", "axe-core"})
    if (test::slurp(test::source_path(std::string("node_modules/") + pkg + "/package.json")).empty())
      return std::string("the npm package ") + pkg + " is missing: run scripts/setup.sh (npm ci)";
  if (::access("/usr/bin/chromium", X_OK) != 0) return "/usr/bin/chromium is missing: run scripts/setup.sh (apt chromium)";
  return "";
}

TEST(WebUi, PlaygroundDashboardAndClusterViewInChromium) {
  if (const std::string why = browser_missing(); !why.empty()) GTEST_SKIP() << why;
#ifdef TH_SANITIZED_TESTS
  // The release stage runs it; sanitized, it cost 12 s of CI for server paths (static files,
  // SSE, cancel) that ServeApi's tests already run under the sanitizers.
  GTEST_SKIP() << "the browser test runs in the release stage only";
#endif
  const std::string keys = test::temp_path("web_ui_keys.txt");
  std::ofstream(keys) << "sk-webui-0123456789abcdef webui\n";
  // 4096 positions: the Stop check asks for 4,000 tokens, seconds of work even for stories260K,
  // so the server is still generating when the browser closes the connection.
  ServeProcess cell({"-m", stories(), "-t", "1", "--kv-cache-mib", "64", "--max-model-len", "4096", "--api-keys", keys});
  ASSERT_TRUE(cell.ok()) << cell.log();
  ServeProcess victim({"-m", stories(), "-t", "1", "--kv-cache-mib", "16"});
  ASSERT_TRUE(victim.ok()) << victim.log();
  ServeProcess router("router", {"--cell", cell.url(), "--cell", victim.url()}, 30);
  ASSERT_TRUE(router.ok()) << router.log();

  const std::string out = std::filesystem::path(test::binary_path()).parent_path() / "web_ui_screenshots";
  const std::string config = test::temp_path("web_ui.json");
  std::ofstream(config) << nlohmann::json{{"cell", cell.url()},         {"key", "sk-webui-0123456789abcdef"},
                                          {"router", router.url()},     {"victim", victim.url()},
                                          {"victim_pid", victim.pid()}, {"binary", test::binary_path()},
                                          {"out", out},                 {"chromium", "/usr/bin/chromium"}}
                               .dump();
  test::ProcessResult r =
      test::run_process({"/usr/bin/env", "node", test::source_path("tests/browser/web_ui.mjs"), config}, 120);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out << r.err;
  for (const char* line : {"ok   playground: streamed answer", "ok   playground: stop cancels the request on the server",
                           "ok   dashboard: under bench serve load", "ok   cluster view: the cell shows dead",
                           "ok   playground: axe-core", "ok   dashboard: axe-core", "ok   cluster view: axe-core"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out << r.err;
  std::printf("%s", r.out.c_str());
  ::unlink(config.c_str());
  ::unlink(keys.c_str());
}

}  // namespace
}  // namespace th
