// `tokenhive bench serve` against a real `tokenhive serve` on stories260K: the numbers it
// reports agree with the server's own accounting and with each other.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "run_process.h"
#include "serve_process.h"
#include "test_util.h"

namespace th {
namespace {

using json = nlohmann::json;

double metric_count(const std::string& scrape, const std::string& name) {
  const size_t at = scrape.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(scrape.substr(at + name.size() + 2));
}

TEST(BenchServe, NumbersAgreeWithTheServer) {
  test::ServeProcess s({"-m", test::shared_path("models/stories260K.gguf"), "-t", "1", "--kv-cache-mib", "64"});
  ASSERT_TRUE(s.ok()) << s.log();
  const std::string out = test::temp_path("bench.json"), html = test::temp_path("bench.html");
  test::ProcessResult r = test::run_process(
      {test::binary_path(), "bench", "serve", "--url", s.url(), "--num-prompts", "24", "--max-concurrency", "6",
       "--random-input-len", "24", "--random-output-len", "20", "--seed", "3", "--priority-mix",
       "high=0.25,normal=0.5,low=0.25", "--json", out, "--html", html, "--no-progress"},
      180);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json j = json::parse(test::slurp(out));
  EXPECT_EQ(j["requests"], 24);
  EXPECT_EQ(j["completed"], 24);
  EXPECT_EQ(j["failed"], 0);
  // ignore_eos: every request generates exactly its output length.
  EXPECT_EQ(j["output_tokens"], 24 * 20);
  EXPECT_NEAR(j["output_tokens_per_s"].get<double>(), j["output_tokens"].get<double>() / j["duration_s"].get<double>(), 1e-6);
  for (const char* m : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}) {
    const json& x = j[m];
    EXPECT_LE(x["p50"].get<double>(), x["p90"].get<double>()) << m;
    EXPECT_LE(x["p90"].get<double>(), x["p99"].get<double>()) << m;
    EXPECT_GE(x["mean"].get<double>(), 0) << m;
  }
  EXPECT_LE(j["ttft_ms"]["p50"].get<double>(), j["e2e_ms"]["p50"].get<double>());
  int by_class = 0;
  for (auto& [cls, v] : j["by_priority"].items()) by_class += v["completed"].get<int>();
  EXPECT_EQ(by_class, 24);
  // The server counted the same tokens.
  const std::string scrape = [&] {
    test::ProcessResult m = test::run_process({"/usr/bin/env", "curl", "-s", s.url() + "/metrics"}, 30);
    return m.out;
  }();
  EXPECT_EQ(metric_count(scrape, "tokenhive_generation_tokens_total"), 24 * 20) << scrape.substr(0, 2000);
  EXPECT_EQ(metric_count(scrape, "tokenhive_prompt_tokens_total"), j["input_tokens"].get<double>());
  const std::string report = test::slurp(html);
  EXPECT_NE(report.find("<svg"), std::string::npos);
  EXPECT_EQ(report.find("<script src"), std::string::npos);
  ::unlink(out.c_str());
  ::unlink(html.c_str());
}

TEST(BenchServe, AnUnreachableServerFailsEveryRequestCleanly) {
  test::ProcessResult r = test::run_process({test::binary_path(), "bench", "serve", "--url", "http://127.0.0.1:1",
                                             "--num-prompts", "3", "--no-progress"},
                                            60);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
}

}  // namespace
}  // namespace th
