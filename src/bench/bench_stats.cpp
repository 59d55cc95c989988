#include "bench/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

namespace th::bench {

double percentile(const std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const double h = static_cast<double>(v.size() - 1) * std::clamp(p, 0.0, 100.0) / 100.0;
  const size_t lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (h - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

Distribution summarize(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = static_cast<int64_t>(values.size());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  d.min = values.front();
  d.max = values.back();
  d.p50 = percentile(values, 50);
  d.p90 = percentile(values, 90);
  d.p99 = percentile(values, 99);
  return d;
}

RequestLatencies request_latencies(const RequestRecord& r) {
  RequestLatencies l;
  l.ttft_ms = (r.first_token_s - r.send_s) * 1e3;
  l.e2e_ms = (r.end_s - r.send_s) * 1e3;
  if (r.output_tokens >= 2) l.tpot_ms = (l.e2e_ms - l.ttft_ms) / static_cast<double>(r.output_tokens - 1);
  for (size_t i = 1; i < r.token_times_s.size(); ++i)
    l.itl_ms.push_back((r.token_times_s[i] - r.token_times_s[i - 1]) * 1e3);
  return l;
}

Result<GoodputTargets> parse_goodput(const std::vector<std::string>& items) {
  GoodputTargets t;
  std::string all;
  for (const std::string& s : items) all += s + " ";
  std::replace(all.begin(), all.end(), ',', ' ');
  std::istringstream in(all);
  std::string item;
  auto bad = [](const std::string& what) {
    return Status::errorf("--goodput: ", what, " (expected e.g. ttft:200 tpot:50 e2el:5000, milliseconds)");
  };
  while (in >> item) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) return bad(cat("'", item, "' has no ':'"));
    const std::string name = item.substr(0, colon), value = item.substr(colon + 1);
    std::optional<double>* slot = name == "ttft" ? &t.ttft_ms : name == "tpot" ? &t.tpot_ms
                                  : (name == "e2el" || name == "e2e") ? &t.e2e_ms : nullptr;
    if (!slot) return bad(cat("unknown metric '", name, "' (ttft, tpot, e2el)"));
    size_t used = 0;
    double ms = -1;
    try {
      ms = std::stod(value, &used);
    } catch (...) {
      used = 0;
    }
    if (value.empty() || used != value.size() || !std::isfinite(ms) || ms <= 0)
      return bad(cat("'", value, "' is not a number of milliseconds > 0"));
    if (*slot) return bad(cat("'", name, "' given twice"));
    *slot = ms;
  }
  return t;
}

bool is_good(const RequestLatencies& l, const GoodputTargets& t) {
  if (t.ttft_ms && l.ttft_ms > *t.ttft_ms) return false;
  if (t.tpot_ms && l.tpot_ms && *l.tpot_ms > *t.tpot_ms) return false;
  if (t.e2e_ms && l.e2e_ms > *t.e2e_ms) return false;
  return true;
}

namespace {

ClassStats class_stats(const std::vector<const RequestRecord*>& records, double duration_s, const GoodputTargets& g) {
  ClassStats c;
  std::vector<double> ttft, tpot, itl, e2e;
  int64_t good = 0;
  for (const RequestRecord* r : records) {
    ++c.requests;
    if (!r->ok) {
      ++c.failed;
      continue;
    }
    ++c.completed;
    c.input_tokens += r->prompt_tokens;
    c.output_tokens += r->output_tokens;
    RequestLatencies l = request_latencies(*r);
    ttft.push_back(l.ttft_ms);
    e2e.push_back(l.e2e_ms);
    if (l.tpot_ms) tpot.push_back(*l.tpot_ms);
    itl.insert(itl.end(), l.itl_ms.begin(), l.itl_ms.end());
    if (g.any() && is_good(l, g)) ++good;
  }
  const double d = duration_s > 0 ? duration_s : 0;
  auto per_s = [&](double x) { return d > 0 ? x / d : 0.0; };
  c.request_throughput = per_s(static_cast<double>(c.completed));
  c.output_tokens_per_s = per_s(static_cast<double>(c.output_tokens));
  c.total_tokens_per_s = per_s(static_cast<double>(c.input_tokens + c.output_tokens));
  if (g.any()) {
    c.good_requests = good;
    c.goodput_per_s = per_s(static_cast<double>(good));
  }
  c.ttft_ms = summarize(std::move(ttft));
  c.tpot_ms = summarize(std::move(tpot));
  c.itl_ms = summarize(std::move(itl));
  c.e2e_ms = summarize(std::move(e2e));
  return c;
}

}  // namespace

BenchStats compute_stats(const std::vector<RequestRecord>& records, double duration_s, const GoodputTargets& goodput) {
  BenchStats s;
  s.duration_s = duration_s;
  s.goodput = goodput;
  std::vector<const RequestRecord*> all;
  std::map<std::string, std::vector<const RequestRecord*>> classes;
  std::map<std::string, int64_t> errors;
  for (const RequestRecord& r : records) {
    all.push_back(&r);
    classes[r.priority].push_back(&r);
    if (!r.ok) ++errors[r.error];
  }
  s.all = class_stats(all, duration_s, goodput);
  for (const auto& [name, rs] : classes) s.by_priority[name] = class_stats(rs, duration_s, goodput);
  s.errors.assign(errors.begin(), errors.end());
  std::stable_sort(s.errors.begin(), s.errors.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return s;
}

}  // namespace th::bench
