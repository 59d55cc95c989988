#include "bench/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "bench/bench_report.h"

namespace th::bench {

namespace {

constexpr double kW = 460, kH = 240, kLeft = 56, kRight = 14, kTop = 26, kBottom = 38;

std::string num(double x) {
  char buf[32];
  if (std::fabs(x) >= 100 || x == std::floor(x)) std::snprintf(buf, sizeof buf, "%.0f", x);
  else std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

// A "nice" axis maximum: 1, 2 or 5 times a power of ten, at least x.
double nice_max(double x) {
  if (!(x > 0)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(x)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= x) return m * p;
  return 10 * p;
}

struct Frame {
  std::string title, xlabel, ylabel;
  double xmin = 0, xmax = 1, ymax = 1;
  double x(double v) const { return kLeft + (v - xmin) / (xmax - xmin) * (kW - kLeft - kRight); }
  double y(double v) const { return kH - kBottom - v / ymax * (kH - kTop - kBottom); }
};

std::string open_svg(const Frame& f) {
  std::string s = cat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", kW, "\" height=\"", kH, "\" viewBox=\"0 0 ",
                      kW, " ", kH, "\">\n");
  s += cat("<text x=\"", kW / 2, "\" y=\"16\" text-anchor=\"middle\" class=\"t\">", html_escape(f.title), "</text>\n");
  for (int i = 0; i <= 4; ++i) {
    const double xv = f.xmin + (f.xmax - f.xmin) * i / 4, yv = f.ymax * i / 4;
    s += cat("<line x1=\"", kLeft, "\" x2=\"", kW - kRight, "\" y1=\"", f.y(yv), "\" y2=\"", f.y(yv),
             "\" class=\"g\"/>\n");
    s += cat("<text x=\"", kLeft - 4, "\" y=\"", f.y(yv) + 4, "\" text-anchor=\"end\">", num(yv), "</text>\n");
    s += cat("<text x=\"", f.x(xv), "\" y=\"", kH - kBottom + 14, "\" text-anchor=\"middle\">", num(xv), "</text>\n");
  }
  s += cat("<text x=\"", (kLeft + kW - kRight) / 2, "\" y=\"", kH - 6, "\" text-anchor=\"middle\">",
           html_escape(f.xlabel), "</text>\n");
  s += cat("<text x=\"12\" y=\"", (kTop + kH - kBottom) / 2, "\" text-anchor=\"middle\" transform=\"rotate(-90 12 ",
           (kTop + kH - kBottom) / 2, ")\">", html_escape(f.ylabel), "</text>\n");
  return s;
}

// An x axis around [lo, hi]: a nice span (1, 2 or 5 x 10^k) starting at a multiple of its
// quarter, so that the data fills most of the width.
std::pair<double, double> x_axis(double lo, double hi) {
  double span = nice_max(hi - lo);
  const double start = std::floor(lo / (span / 4)) * (span / 4);
  if (start + span < hi) span = nice_max(hi - start);
  return {start, start + span};
}

// Bars of equal width over the axis; values past its end (above 1.25 x p99) fall in the last bar.
std::string histogram_svg(const std::string& title, const std::vector<double>& sorted) {
  constexpr int kBins = 40;
  const auto [lo, hi] = x_axis(sorted.front(), std::min(sorted.back(), percentile(sorted, 99) * 1.25));
  const double width = (hi - lo) / kBins;
  std::vector<int64_t> bins(kBins, 0);
  for (double v : sorted) bins[std::clamp(static_cast<int>((v - lo) / width), 0, kBins - 1)]++;
  Frame f{title + " histogram", "ms", "requests", lo, hi,
          nice_max(static_cast<double>(*std::max_element(bins.begin(), bins.end())))};
  std::string s = open_svg(f);
  for (int b = 0; b < kBins; ++b) {
    if (!bins[b]) continue;
    const double b0 = lo + width * b, b1 = b0 + width;
    const double x0 = f.x(b0), x1 = f.x(b1), y = f.y(static_cast<double>(bins[b]));
    s += cat("<rect x=\"", x0, "\" y=\"", y, "\" width=\"", std::max(0.5, x1 - x0 - 1), "\" height=\"",
             kH - kBottom - y, "\" class=\"bar\"><title>", num(b0), "-", num(b1), " ms: ", bins[b],
             "</title></rect>\n");
  }
  return s + "</svg>\n";
}

std::string polyline(const Frame& f, const std::vector<std::pair<double, double>>& pts, const char* cls) {
  std::string s = cat("<polyline class=\"", cls, "\" points=\"");
  for (const auto& [x, y] : pts) s += cat(f.x(x), ",", f.y(y), " ");
  return s + "\"/>\n";
}

std::string cdf_svg(const std::string& title, const std::vector<double>& sorted) {
  const auto [lo, hi] = x_axis(sorted.front(), sorted.back());
  Frame f{title + " CDF", "ms", "fraction of requests", lo, hi, 1};
  std::vector<std::pair<double, double>> pts;
  const size_t n = sorted.size(), step = std::max<size_t>(1, n / 400);  // ~400 points at most
  for (size_t i = 0; i < n; i += step) pts.emplace_back(sorted[i], static_cast<double>(i + 1) / static_cast<double>(n));
  pts.emplace_back(sorted.back(), 1.0);
  return open_svg(f) + polyline(f, pts, "line") + "</svg>\n";
}

std::string timeline_svg(const std::string& title, const std::string& ylabel, const std::vector<double>& per_bin,
                         double bin_s) {
  Frame f{title, "seconds since start", ylabel, 0, nice_max(bin_s * static_cast<double>(per_bin.size())),
          nice_max(*std::max_element(per_bin.begin(), per_bin.end()))};
  std::vector<std::pair<double, double>> pts;
  for (size_t i = 0; i < per_bin.size(); ++i) {
    pts.emplace_back(bin_s * static_cast<double>(i), per_bin[i]);
    pts.emplace_back(bin_s * static_cast<double>(i + 1), per_bin[i]);
  }
  return open_svg(f) + polyline(f, pts, "line") + "</svg>\n";
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string html_report(const std::vector<RequestRecord>& records, const BenchStats& stats,
                        const nlohmann::json& config, const std::string& title) {
  std::string h =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + html_escape(title) +
      "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}pre{background:#f6f6f6;padding:12px}"
      "svg{margin:6px;background:#fff;border:1px solid #ddd}svg text{font-size:11px;fill:#333}svg .t{font-size:13px;"
      "font-weight:bold}.g{stroke:#e4e4e4}.bar{fill:#4a78c2}.line{fill:none;stroke:#c2554a;stroke-width:1.5}"
      "td{padding:2px 10px}</style></head><body>\n";
  h += "<h1>" + html_escape(title) + "</h1>\n<table>\n";
  if (config.is_object())
    for (auto it = config.begin(); it != config.end(); ++it)
      h += "<tr><td>" + html_escape(it.key()) + "</td><td>" +
           html_escape(it->is_string() ? it->get<std::string>() : it->dump()) + "</td></tr>\n";
  h += "</table>\n<pre>" + html_escape(stats_table(stats, "")) + "</pre>\n";

  std::vector<double> ttft, tpot, itl, e2e;
  for (const RequestRecord& r : records) {
    if (!r.ok) continue;
    RequestLatencies l = request_latencies(r);
    ttft.push_back(l.ttft_ms);
    e2e.push_back(l.e2e_ms);
    if (l.tpot_ms) tpot.push_back(*l.tpot_ms);
    itl.insert(itl.end(), l.itl_ms.begin(), l.itl_ms.end());
  }
  for (auto [name, values] : {std::pair<const char*, std::vector<double>*>{"TTFT", &ttft}, {"TPOT", &tpot},
                              {"ITL", &itl}, {"E2E", &e2e}}) {
    h += cat("<h2>", name, " (ms)</h2>\n");
    if (values->empty()) {
      h += "<p>no samples</p>\n";
      continue;
    }
    std::sort(values->begin(), values->end());
    h += histogram_svg(name, *values) + cdf_svg(name, *values);
  }

  h += "<h2>Over the run</h2>\n";
  const double duration = std::max(stats.duration_s, 1e-3);
  // About 60 bins, whole seconds once the run is a minute long.
  const double bin_s = duration >= 60 ? std::ceil(duration / 60) : duration / 60;
  const size_t n_bins = static_cast<size_t>(std::ceil(duration / bin_s));
  std::vector<double> tokens(n_bins, 0), in_flight(n_bins, 0);
  auto bin_of = [&](double t) { return std::min(n_bins - 1, static_cast<size_t>(std::max(0.0, t) / bin_s)); };
  for (const RequestRecord& r : records) {
    if (r.ok && !r.token_times_s.empty()) {
      // A chunk may carry several tokens: the request's tokens are spread over its chunks.
      const double per_chunk = static_cast<double>(r.output_tokens) / static_cast<double>(r.token_times_s.size());
      for (double t : r.token_times_s) tokens[bin_of(t)] += per_chunk / bin_s;
    }
    // In flight: the seconds of each bin the request was open, / the bin's length.
    for (size_t b = bin_of(r.send_s); b <= bin_of(r.end_s); ++b) {
      const double lo = std::max(r.send_s, bin_s * static_cast<double>(b));
      const double hi = std::min(r.end_s, bin_s * static_cast<double>(b + 1));
      if (hi > lo) in_flight[b] += (hi - lo) / bin_s;
    }
  }
  h += timeline_svg("output tokens/s", "tokens/s", tokens, bin_s);
  h += timeline_svg("requests in flight (mean over each bin)", "requests", in_flight, bin_s);
  h += "</body></html>\n";
  return h;
}

}  // namespace th::bench
