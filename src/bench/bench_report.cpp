#include "bench/bench_report.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <vector>

namespace th::bench {

namespace {

using nlohmann::json;

json distribution_json(const Distribution& d) {
  auto v = [&](double x) { return d.count > 0 ? json(x) : json(nullptr); };
  return {{"count", d.count}, {"mean", v(d.mean)}, {"min", v(d.min)}, {"max", v(d.max)},
          {"p50", v(d.p50)},  {"p90", v(d.p90)},   {"p99", v(d.p99)}};
}

json class_json(const ClassStats& c, double duration_s) {
  json j;
  j["requests"] = c.requests;
  j["completed"] = c.completed;
  j["failed"] = c.failed;
  j["input_tokens"] = c.input_tokens;
  j["output_tokens"] = c.output_tokens;
  j["duration_s"] = duration_s;
  j["request_throughput"] = c.request_throughput;
  j["output_tokens_per_s"] = c.output_tokens_per_s;
  j["total_tokens_per_s"] = c.total_tokens_per_s;
  j["good_requests"] = c.good_requests ? json(*c.good_requests) : json(nullptr);
  j["goodput_per_s"] = c.goodput_per_s ? json(*c.goodput_per_s) : json(nullptr);
  j["ttft_ms"] = distribution_json(c.ttft_ms);
  j["tpot_ms"] = distribution_json(c.tpot_ms);
  j["itl_ms"] = distribution_json(c.itl_ms);
  j["e2e_ms"] = distribution_json(c.e2e_ms);
  return j;
}

std::string fmt(double x, int decimals = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}

// A json number as text; "-" for null or absent.
std::string fmt_json(const json* v) {
  if (!v || !v->is_number()) return "-";
  if (v->is_number_integer()) return std::to_string(v->get<int64_t>());
  return fmt(v->get<double>());
}

const json* at_path(const json& j, const std::vector<std::string>& path) {
  const json* cur = &j;
  for (const std::string& k : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(k);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

void pad_row(std::string& out, const std::string& label, const std::vector<std::string>& cells, int label_w,
             int cell_w) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%-*s", label_w, label.c_str());
  out += buf;
  for (const std::string& c : cells) {
    std::snprintf(buf, sizeof buf, " %*s", cell_w, c.c_str());
    out += buf;
  }
  out += '\n';
}

}  // namespace

json stats_json(const BenchStats& s, const json& config) {
  json j = class_json(s.all, s.duration_s);
  json by = json::object();
  for (const auto& [name, c] : s.by_priority) by[name] = class_json(c, s.duration_s);
  j["by_priority"] = std::move(by);
  json targets = json::object();
  if (s.goodput.ttft_ms) targets["ttft_ms"] = *s.goodput.ttft_ms;
  if (s.goodput.tpot_ms) targets["tpot_ms"] = *s.goodput.tpot_ms;
  if (s.goodput.e2e_ms) targets["e2e_ms"] = *s.goodput.e2e_ms;
  j["goodput_targets"] = std::move(targets);
  json errors = json::array();
  for (const auto& [message, count] : s.errors) errors.push_back({{"message", message}, {"count", count}});
  j["errors"] = std::move(errors);
  j["config"] = config;
  return j;
}

std::string stats_table(const BenchStats& s, const std::string& title) {
  std::vector<std::pair<std::string, const ClassStats*>> cols = {{"all", &s.all}};
  if (s.by_priority.size() > 1 || (s.by_priority.size() == 1 && s.by_priority.begin()->first != "normal"))
    for (const char* name : kPriorityNames)
      if (auto it = s.by_priority.find(name); it != s.by_priority.end()) cols.emplace_back(name, &it->second);
  std::string out = "============ Serving Benchmark Result ============\n";
  if (!title.empty()) out += title + "\n";
  out += "duration " + fmt(s.duration_s) + " s\n";
  constexpr int kLabel = 24, kCell = 11;
  std::vector<std::string> head;
  for (const auto& c : cols) head.push_back(c.first);
  pad_row(out, "", head, kLabel, kCell);
  auto row = [&](const std::string& label, auto value) {
    std::vector<std::string> cells;
    for (const auto& c : cols) cells.push_back(value(*c.second));
    pad_row(out, label, cells, kLabel, kCell);
  };
  auto integer = [](int64_t x) { return std::to_string(x); };
  row("requests", [&](const ClassStats& c) { return integer(c.requests); });
  row("completed", [&](const ClassStats& c) { return integer(c.completed); });
  row("failed", [&](const ClassStats& c) { return integer(c.failed); });
  row("input tokens", [&](const ClassStats& c) { return integer(c.input_tokens); });
  row("output tokens", [&](const ClassStats& c) { return integer(c.output_tokens); });
  row("requests/s", [&](const ClassStats& c) { return fmt(c.request_throughput); });
  row("output tokens/s", [&](const ClassStats& c) { return fmt(c.output_tokens_per_s); });
  row("total tokens/s", [&](const ClassStats& c) { return fmt(c.total_tokens_per_s); });
  if (s.goodput.any()) {
    row("good requests", [&](const ClassStats& c) { return integer(c.good_requests.value_or(0)); });
    row("goodput (req/s)", [&](const ClassStats& c) { return fmt(c.goodput_per_s.value_or(0)); });
  }
  const std::pair<const char*, Distribution ClassStats::*> metrics[] = {
      {"TTFT", &ClassStats::ttft_ms}, {"TPOT", &ClassStats::tpot_ms}, {"ITL", &ClassStats::itl_ms},
      {"E2E", &ClassStats::e2e_ms}};
  const std::pair<const char*, double Distribution::*> stats[] = {
      {"mean", &Distribution::mean}, {"p50", &Distribution::p50}, {"p90", &Distribution::p90},
      {"p99", &Distribution::p99}, {"max", &Distribution::max}};
  for (const auto& metric : metrics) {
    // Plain names, not structured bindings: clang 14 (the fuzz build's) cannot capture those.
    const char* mname = metric.first;
    Distribution ClassStats::*mfield = metric.second;
    out += std::string("---- ") + mname + " (ms) ----\n";
    for (const auto& stat : stats) {
      const char* sname = stat.first;
      double Distribution::*sfield = stat.second;
      row(std::string(mname) + " " + sname, [&](const ClassStats& c) {
        const Distribution& d = c.*mfield;
        return d.count > 0 ? fmt(d.*sfield) : std::string("-");
      });
    }
  }
  if (!s.errors.empty()) {
    out += "---- errors ----\n";
    size_t shown = 0;
    for (const auto& [message, count] : s.errors) {
      if (++shown > 5) {
        out += cat("  ... and ", s.errors.size() - 5, " other messages\n");
        break;
      }
      out += cat("  ", count, " x ", message, "\n");
    }
  }
  out += "==================================================\n";
  return out;
}

std::string compare_table(const json& a, const json& b, const std::string& name_a, const std::string& name_b) {
  std::string out = cat("A: ", name_a, "\nB: ", name_b, "\n");
  constexpr int kLabel = 30, kCell = 12;
  pad_row(out, "", {"A", "B", "B/A"}, kLabel, kCell);
  auto row = [&](const std::string& label, const std::vector<std::string>& path) {
    const json *va = at_path(a, path), *vb = at_path(b, path);
    std::string ratio = "-";
    if (va && vb && va->is_number() && vb->is_number() && va->get<double>() != 0)
      ratio = fmt(vb->get<double>() / va->get<double>(), 3);
    pad_row(out, label, {fmt_json(va), fmt_json(vb), ratio}, kLabel, kCell);
  };
  // The whole run in full; each class by its counts, throughputs and median and tail latencies.
  auto section = [&](const std::string& prefix, const std::vector<std::string>& base, bool full) {
    auto p = [&](std::vector<std::string> rest) {
      std::vector<std::string> path = base;
      path.insert(path.end(), rest.begin(), rest.end());
      return path;
    };
    for (const char* k : {"requests", "completed", "failed", "output_tokens"})
      if (full || std::string(k) == "completed" || std::string(k) == "failed") row(prefix + k, p({k}));
    if (full) row(prefix + "duration_s", p({"duration_s"}));
    for (const char* k : {"request_throughput", "output_tokens_per_s", "goodput_per_s"}) row(prefix + k, p({k}));
    for (const char* m : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"})
      for (const char* q : {"mean", "p50", "p90", "p99"})
        if (full || (std::string(q) != "mean" && std::string(q) != "p90")) row(prefix + m + " " + q, p({m, q}));
  };
  section("", {}, true);
  std::set<std::string> classes;
  for (const json* j : {&a, &b})
    if (const json* by = at_path(*j, {"by_priority"}); by && by->is_object())
      for (auto it = by->begin(); it != by->end(); ++it) classes.insert(it.key());
  if (classes.size() > 1 || (classes.size() == 1 && *classes.begin() != "normal"))
    for (const char* name : kPriorityNames)
      if (classes.count(name)) {
        out += std::string("---- ") + name + " ----\n";
        section(std::string(name) + " ", {"by_priority", name}, false);
      }
  return out;
}

Result<json> read_stats_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::errorf(path, ": cannot open");
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::errorf(path, ": not valid JSON");
  if (!j.is_object() || !j.contains("requests") || !j.contains("ttft_ms"))
    return Status::errorf(path, ": not a `bench serve --json` result (no requests, ttft_ms)");
  return j;
}

}  // namespace th::bench
