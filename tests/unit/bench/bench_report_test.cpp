#include "bench/bench_report.h"

#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "bench/html_report.h"

namespace th::bench {
namespace {

using nlohmann::json;

std::vector<RequestRecord> sample_records() {
  std::vector<RequestRecord> rs;
  for (int i = 0; i < 20; ++i) {
    RequestRecord r;
    r.index = i;
    r.ok = i != 7;
    r.error = r.ok ? "" : "the server sent an error: <overloaded>";
    r.priority = i % 4 == 0 ? "high" : "normal";
    r.send_s = 0.1 * i;
    r.first_token_s = r.send_s + 0.05 + 0.01 * i;
    for (int k = 0; k < 8; ++k) r.token_times_s.push_back(r.first_token_s + 0.02 * k);
    r.end_s = r.token_times_s.back();
    r.output_tokens = 8;
    r.prompt_tokens = 32;
    rs.push_back(r);
  }
  return rs;
}

void expect_class_shape(const json& j) {
  for (const char* k : {"requests", "completed", "failed", "input_tokens", "output_tokens"})
    EXPECT_TRUE(j.at(k).is_number_integer()) << k;
  for (const char* k : {"duration_s", "request_throughput", "output_tokens_per_s", "total_tokens_per_s"})
    EXPECT_TRUE(j.at(k).is_number()) << k;
  EXPECT_TRUE(j.contains("good_requests") && j.contains("goodput_per_s"));
  for (const char* m : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"})
    for (const char* q : {"count", "mean", "p50", "p90", "p99", "min", "max"}) EXPECT_TRUE(j.at(m).contains(q)) << m << q;
}

TEST(BenchReport, JsonHasTheDocumentedShape) {
  GoodputTargets t;
  t.ttft_ms = 100;
  const BenchStats s = compute_stats(sample_records(), 2.5, t);
  const json j = stats_json(s, {{"url", "http://x"}});
  expect_class_shape(j);
  EXPECT_EQ(j["requests"], 20);
  EXPECT_EQ(j["completed"], 19);
  EXPECT_EQ(j["failed"], 1);
  EXPECT_EQ(j["output_tokens"], 19 * 8);
  EXPECT_DOUBLE_EQ(j["output_tokens_per_s"].get<double>(), 19 * 8 / 2.5);
  EXPECT_DOUBLE_EQ(j["ttft_ms"]["p50"].get<double>(), s.all.ttft_ms.p50);
  EXPECT_TRUE(j["good_requests"].is_number_integer());
  EXPECT_EQ(j["goodput_targets"]["ttft_ms"], 100.0);
  EXPECT_EQ(j["errors"][0]["count"], 1);
  EXPECT_EQ(j["config"]["url"], "http://x");
  ASSERT_TRUE(j["by_priority"].is_object());
  EXPECT_EQ(j["by_priority"].size(), 2u);
  for (auto it = j["by_priority"].begin(); it != j["by_priority"].end(); ++it) expect_class_shape(*it);
  EXPECT_EQ(j["by_priority"]["high"]["requests"], 5);
  // Without samples the values are null, never a made-up 0.
  const json empty = stats_json(compute_stats({}, 1.0, {}), json::object());
  EXPECT_TRUE(empty["ttft_ms"]["p99"].is_null());
  EXPECT_EQ(empty["ttft_ms"]["count"], 0);
  EXPECT_TRUE(empty["good_requests"].is_null());
}

TEST(BenchReport, TableHasAColumnPerClass) {
  const std::string t = stats_table(compute_stats(sample_records(), 2.5, {}), "my run");
  EXPECT_NE(t.find("my run"), std::string::npos);
  EXPECT_NE(t.find("high"), std::string::npos);
  EXPECT_NE(t.find("normal"), std::string::npos);
  EXPECT_NE(t.find("TTFT p99"), std::string::npos);
  EXPECT_NE(t.find("1 x the server sent an error"), std::string::npos);
}

TEST(BenchReport, CompareShowsRatios) {
  json a = stats_json(compute_stats(sample_records(), 2.0, {}), json::object());
  json b = a;
  b["output_tokens_per_s"] = a["output_tokens_per_s"].get<double>() * 2;
  b["ttft_ms"]["p50"] = a["ttft_ms"]["p50"].get<double>() / 4;
  b["by_priority"]["high"]["completed"] = 10;  // A has 5
  b.erase("failed");
  const std::string t = compare_table(a, b, "a.json", "b.json");
  auto line = [&](const std::string& label) {
    const size_t at = t.find("\n" + label + " ");
    EXPECT_NE(at, std::string::npos) << label << "\n" << t;
    return at == std::string::npos ? std::string() : t.substr(at + 1, t.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(line("output_tokens_per_s").find("2.000"), std::string::npos) << t;
  EXPECT_NE(line("ttft_ms p50").find("0.250"), std::string::npos) << t;
  EXPECT_NE(line("high completed").find("2.000"), std::string::npos) << t;
  const std::string f = line("failed");  // missing in B: "-", no ratio
  EXPECT_EQ(f.substr(f.size() - 1), "-");
  EXPECT_NE(t.find("A: a.json"), std::string::npos);
}

TEST(BenchReport, ReadStatsJsonChecksTheFile) {
  const std::string path = testing::TempDir() + "/stats_" + std::to_string(getpid()) + ".json";
  std::ofstream(path) << stats_json(compute_stats(sample_records(), 2.0, {}), json::object()).dump();
  EXPECT_TRUE(read_stats_json(path).ok());
  std::ofstream(path) << "{\"hello\": 1}";
  EXPECT_NE(read_stats_json(path).message().find("not a `bench serve --json` result"), std::string::npos);
  std::ofstream(path) << "{";
  EXPECT_NE(read_stats_json(path).message().find("not valid JSON"), std::string::npos);
  std::remove(path.c_str());
  EXPECT_NE(read_stats_json(path).message().find("cannot open"), std::string::npos);
}

TEST(HtmlReport, SelfContainedWithCharts) {
  const std::vector<RequestRecord> rs = sample_records();
  const std::string h = html_report(rs, compute_stats(rs, 2.5, {}), {{"url", "http://a<b>"}}, "run <1>");
  EXPECT_EQ(h.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(h.find("<title>run &lt;1&gt;</title>"), std::string::npos);
  EXPECT_NE(h.find("http://a&lt;b&gt;"), std::string::npos);
  EXPECT_EQ(h.find("<script"), std::string::npos);
  EXPECT_EQ(h.find("src=\"http"), std::string::npos);
  size_t svgs = 0;
  for (size_t at = h.find("<svg"); at != std::string::npos; at = h.find("<svg", at + 1)) ++svgs;
  EXPECT_EQ(svgs, 4u * 2 + 2);  // histogram + CDF for TTFT, TPOT, ITL, E2E; two timelines
  EXPECT_NE(h.find("TTFT CDF"), std::string::npos);
  // No completed request: still a valid page, no charts of nothing.
  std::vector<RequestRecord> none = {rs[7]};
  const std::string e = html_report(none, compute_stats(none, 1.0, {}), json::object(), "x");
  EXPECT_NE(e.find("no samples"), std::string::npos);
}

}  // namespace
}  // namespace th::bench
