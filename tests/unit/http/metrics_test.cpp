#include "http/metrics.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace th::http {
namespace {

std::string value_text(double v) {
  std::string s;
  append_metric_value(s, v);
  return s;
}

// Sample lines of a rendered page: series (name and labels as printed) -> value.
std::map<std::string, double> samples(const std::string& page) {
  std::map<std::string, double> out;
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    out[line.substr(0, sp)] = std::strtod(line.c_str() + sp + 1, nullptr);
  }
  return out;
}

TEST(MetricsFormat, IntegersPrintAsIntegersAndDoublesRoundTrip) {
  EXPECT_EQ(value_text(0), "0");
  EXPECT_EQ(value_text(-0.0), "0");
  EXPECT_EQ(value_text(42), "42");
  EXPECT_EQ(value_text(-7), "-7");
  EXPECT_EQ(value_text(9007199254740992.0), "9007199254740992");
  EXPECT_EQ(value_text(0.1), "0.1");
  EXPECT_EQ(value_text(0.001), "0.001");
  EXPECT_EQ(value_text(2.5), "2.5");
  EXPECT_EQ(value_text(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(value_text(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(value_text(std::nan("")), "NaN");
  for (double v : {1.0 / 3, 1e-7, 6.02214076e23, 1e20, -2.0 / 7, 0.30000000000000004, 5e-324, 1.7976931348623157e308}) {
    const std::string s = value_text(v);
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), v) << s;
    EXPECT_EQ(s.find(' '), std::string::npos);
  }
}

TEST(MetricsFormat, RendersTheExpositionFormat) {
  MetricsRegistry r;
  auto& req = r.counter("app_requests_total", "Requests served.", {"code", "method"});
  req.with({"200", "get"}).inc(3);
  req.with({"404", "get"}).inc();
  req.with({"200", "post"}).inc(0.5);
  r.gauge("app_temperature_celsius", "Current temperature.").with().set(-1.25);
  auto& h = r.histogram("app_latency_seconds", "Latency.", {0.1, 1, 2.5}, {"path"});
  h.with({"/a"}).observe(0.0625);
  h.with({"/a"}).observe(0.5);
  h.with({"/a"}).observe(3);
  EXPECT_EQ(r.render(),
            "# HELP app_requests_total Requests served.\n"
            "# TYPE app_requests_total counter\n"
            "app_requests_total{code=\"200\",method=\"get\"} 3\n"
            "app_requests_total{code=\"200\",method=\"post\"} 0.5\n"
            "app_requests_total{code=\"404\",method=\"get\"} 1\n"
            "# HELP app_temperature_celsius Current temperature.\n"
            "# TYPE app_temperature_celsius gauge\n"
            "app_temperature_celsius -1.25\n"
            "# HELP app_latency_seconds Latency.\n"
            "# TYPE app_latency_seconds histogram\n"
            "app_latency_seconds_bucket{path=\"/a\",le=\"0.1\"} 1\n"
            "app_latency_seconds_bucket{path=\"/a\",le=\"1\"} 2\n"
            "app_latency_seconds_bucket{path=\"/a\",le=\"2.5\"} 2\n"
            "app_latency_seconds_bucket{path=\"/a\",le=\"+Inf\"} 3\n"
            "app_latency_seconds_sum{path=\"/a\"} 3.5625\n"
            "app_latency_seconds_count{path=\"/a\"} 3\n");
}

TEST(MetricsFormat, UnlabeledFamiliesRenderZeroBeforeAnyUse) {
  MetricsRegistry r;
  r.counter("c_total", "c");
  r.histogram("h_seconds", "h", {1});
  r.gauge("g", "labeled, no child yet", {"x"});
  EXPECT_EQ(r.render(),
            "# HELP c_total c\n# TYPE c_total counter\nc_total 0\n"
            "# HELP h_seconds h\n# TYPE h_seconds histogram\n"
            "h_seconds_bucket{le=\"1\"} 0\nh_seconds_bucket{le=\"+Inf\"} 0\nh_seconds_sum 0\nh_seconds_count 0\n"
            "# HELP g labeled, no child yet\n# TYPE g gauge\n");
}

TEST(MetricsFormat, EscapesHelpAndLabelValues) {
  MetricsRegistry r;
  r.gauge("g", "a \\ backslash\nand a \"quote\"", {"v"}).with({"x\\y\"z\nw"}).set(1);
  EXPECT_EQ(r.render(),
            "# HELP g a \\\\ backslash\\nand a \"quote\"\n"
            "# TYPE g gauge\n"
            "g{v=\"x\\\\y\\\"z\\nw\"} 1\n");
}

TEST(MetricsHistogram, BucketsAreCumulativeWithInclusiveUpperBounds) {
  MetricsRegistry r;
  Histogram& h = r.histogram("h", "h", {1, 2, 5, std::numeric_limits<double>::infinity()}).with();
  ASSERT_EQ(h.bounds().size(), 3u);  // the trailing +Inf is implicit
  for (double v : {0.0, 1.0, 1.5, 2.0, 2.0, 4.0, 5.0, 5.5, 100.0}) h.observe(v);
  h.observe(std::nan(""));  // ignored
  const HistogramSnapshot s = h.snapshot();
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 5, 7, 9}));
  EXPECT_EQ(s.count, 9u);
  EXPECT_DOUBLE_EQ(s.sum, 121.0);
  const auto m = samples(r.render());
  EXPECT_EQ(m.at("h_bucket{le=\"1\"}"), 2);
  EXPECT_EQ(m.at("h_bucket{le=\"2\"}"), 5);
  EXPECT_EQ(m.at("h_bucket{le=\"5\"}"), 7);
  EXPECT_EQ(m.at("h_bucket{le=\"+Inf\"}"), 9);
  EXPECT_EQ(m.at("h_count"), 9);
  EXPECT_EQ(m.at("h_sum"), 121);

  Histogram& only_inf = r.histogram("no_bounds", "h", {}).with();
  only_inf.observe(-3);
  EXPECT_EQ(only_inf.snapshot().cumulative, std::vector<uint64_t>{1});
}

TEST(MetricsCounter, NeverGoesDown) {
  MetricsRegistry r;
  Counter& c = r.counter("c_total", "c").with();
  c.inc(2);
  c.inc(-5);
  c.inc(std::nan(""));
  EXPECT_EQ(c.value(), 2);
  c.set_to_at_least(10);
  EXPECT_EQ(c.value(), 10);
  c.set_to_at_least(4);  // a smaller snapshot (a restarted source) does not take it back
  EXPECT_EQ(c.value(), 10);
  c.inc();
  EXPECT_EQ(c.value(), 11);
  Gauge& g = r.gauge("g", "g").with();
  g.inc(3);
  g.dec(5);
  EXPECT_EQ(g.value(), -2);
}

TEST(MetricsFamily, ChildrenAreStableAndSortedFamiliesInRegistrationOrder) {
  MetricsRegistry r;
  auto& z = r.counter("z_total", "z", {"k"});
  auto& a = r.gauge("a", "a", {"k"});
  Counter& zb = z.with({"b"});
  for (int i = 0; i < 100; ++i) z.with({std::to_string(i)});  // rebalancing the map moves no child
  EXPECT_EQ(&zb, &z.with({"b"}));
  a.with({"y"}).set(1);
  a.with({"x"}).set(2);
  const std::string page = r.render();
  EXPECT_LT(page.find("# HELP z_total"), page.find("# HELP a "));
  EXPECT_LT(page.find("a{k=\"x\"} 2"), page.find("a{k=\"y\"} 1"));
}

TEST(MetricsRegistry, RefusesBadNamesAtRegistration) {
  MetricsRegistry r;
  for (const char* bad : {"", "1abc", "a-b", "a b", "__reserved", "é"})
    EXPECT_THROW(r.counter(bad, "x"), std::invalid_argument) << bad;
  int n = 0;
  for (const char* bad : {"", "1a", "a:b", "a-b", "__name", "le"})
    EXPECT_THROW(r.gauge("gauge_" + std::to_string(n++), "x", {bad}), std::invalid_argument) << bad;
  EXPECT_THROW(r.histogram("h", "x", {1}, {"le"}), std::invalid_argument);
  EXPECT_THROW(r.gauge("g", "x", {"a", "a"}), std::invalid_argument);
  EXPECT_THROW(r.histogram("h", "x", {1, 1}), std::invalid_argument);
  EXPECT_THROW(r.histogram("h", "x", {2, 1}), std::invalid_argument);
  EXPECT_THROW(r.histogram("h", "x", {std::nan("")}), std::invalid_argument);
  EXPECT_THROW(r.histogram("h", "x", {-std::numeric_limits<double>::infinity(), 1}), std::invalid_argument);
  // Valid ones.
  EXPECT_NO_THROW(r.counter("a:b_c9_total", "x", {"_x", "y9"}));
  EXPECT_NO_THROW(r.gauge(":colon", "x"));
  EXPECT_NO_THROW(r.histogram("lat_seconds", "x", {0.5, 1}));
  // Twice, or colliding with a histogram's series.
  EXPECT_THROW(r.gauge(":colon", "x"), std::invalid_argument);
  EXPECT_THROW(r.counter("lat_seconds_count", "x"), std::invalid_argument);
  EXPECT_THROW(r.gauge("lat_seconds_bucket", "x"), std::invalid_argument);
  r.gauge("x_sum", "x");
  EXPECT_THROW(r.histogram("x", "x", {1}), std::invalid_argument);
  // A failed registration leaves nothing behind.
  EXPECT_EQ(r.render().find("# HELP x "), std::string::npos);
}

TEST(MetricsFamily, WrongNumberOfLabelValuesThrows) {
  MetricsRegistry r;
  auto& f = r.counter("f_total", "f", {"a", "b"});
  EXPECT_THROW(f.with({"x"}), std::invalid_argument);
  EXPECT_THROW(f.with(), std::invalid_argument);
  EXPECT_THROW(r.counter("g_total", "g").with({"x"}), std::invalid_argument);
}

TEST(MetricsConcurrency, FourWritersGiveExactTotals) {
  MetricsRegistry r;
  auto& cf = r.counter("c_total", "c", {"t"});
  auto& gf = r.gauge("g", "g");
  auto& hf = r.histogram("h", "h", {1, 2});
  constexpr int kThreads = 4, kN = 50000;
  std::vector<std::thread> ts;
  std::vector<Counter*> seen(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      Counter& shared = cf.with({"shared"});  // created concurrently by all four: one child
      seen[static_cast<size_t>(t)] = &shared;
      for (int i = 0; i < kN; ++i) {
        shared.inc();
        cf.with({"by_lookup"}).inc(2);
        gf.with().inc();
        gf.with().dec(0.5);
        hf.with().observe(i % 3 == 0 ? 0.5 : 1.5);
      }
    });
  }
  for (std::thread& t : ts) t.join();
  for (Counter* c : seen) EXPECT_EQ(c, seen[0]);
  EXPECT_EQ(cf.with({"shared"}).value(), kThreads * kN);
  EXPECT_EQ(cf.with({"by_lookup"}).value(), 2.0 * kThreads * kN);
  EXPECT_EQ(gf.with().value(), 0.5 * kThreads * kN);
  const HistogramSnapshot s = hf.with().snapshot();
  const uint64_t small = kThreads * ((kN + 2) / 3);
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{small, kThreads * kN, kThreads * kN}));
  EXPECT_EQ(s.sum, 0.5 * static_cast<double>(small) + 1.5 * static_cast<double>(kThreads * kN - small));
}

TEST(MetricsConcurrency, RenderWhileWritingSeesConsistentPages) {
  MetricsRegistry r;
  auto& cf = r.counter("c_total", "c", {"t"});
  auto& hf = r.histogram("h", "h", {1, 2}, {"t"});
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      const std::string label = "w" + std::to_string(t % 2);  // two children, each shared by two threads
      for (int i = 0; !stop.load(); ++i) {
        cf.with({label}).inc();
        hf.with({label}).observe(i % 2 ? 1.0 : 4.0);  // integral: sums are exact
        if (i % 64 == 0) cf.with({"new" + std::to_string(i / 64 % 50)}).inc();  // children appear mid-render
      }
    });
  }
  std::map<std::string, double> last;
  int checked = 0;
  for (int round = 0; round < 1000 || checked < 100; ++round) {
    const auto m = samples(r.render());
    for (const std::string w : {"w0", "w1"}) {
      const std::string l = "t=\"" + w + "\"";
      if (!m.count("h_count{" + l + "}")) continue;
      ++checked;
      const double b1 = m.at("h_bucket{" + l + ",le=\"1\"}"), b2 = m.at("h_bucket{" + l + ",le=\"2\"}"),
                   inf = m.at("h_bucket{" + l + ",le=\"+Inf\"}"), count = m.at("h_count{" + l + "}"),
                   sum = m.at("h_sum{" + l + "}");
      ASSERT_LE(b1, b2);
      ASSERT_LE(b2, inf);
      ASSERT_EQ(inf, count);
      ASSERT_EQ(sum, b1 * 1.0 + (count - b1) * 4.0);  // the snapshot is one instant
    }
    for (const auto& [series, v] : last)
      if (series.starts_with("c_total")) {
        ASSERT_GE(m.at(series), v) << series;  // counters only grow
      }
    last = m;
  }
  stop = true;
  for (std::thread& t : writers) t.join();
}

}  // namespace
}  // namespace th::http
