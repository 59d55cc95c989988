// --html: a self-contained report of a `bench serve` run (one file, inline SVG, no
// scripts): the settings and result table, histograms and CDFs of TTFT, TPOT, ITL and
// E2E, and output tokens/s and requests in flight over the run.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "bench/bench_stats.h"

namespace th::bench {

/// @brief The report as one HTML document. `records` are the run's (times since its start).
std::string html_report(const std::vector<RequestRecord>& records, const BenchStats& stats,
                        const nlohmann::json& config, const std::string& title);

/// @brief Escapes &, <, >, " and ' for HTML text and attributes.
std::string html_escape(const std::string& s);

}  // namespace th::bench
