// tokenhive bench serve: load-tests any OpenAI-compatible server, as vLLM's
// `vllm bench serve` does (the same flag names where the idea is the same):
//   tokenhive bench serve --url http://127.0.0.1:8080 --num-prompts 200 --request-rate 4
//       --random-input-len 512 --random-output-len 128 --priority-mix high=0.1,normal=0.8,low=0.1
//       --goodput ttft:500 tpot:50 --json run.json --html run.html
//   tokenhive bench serve --compare before.json after.json
// The load generator is src/bench/; this file is its flags and its one tie to HTTP.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_report.h"
#include "bench/bench_stats.h"
#include "bench/html_report.h"
#include "bench/load_driver.h"
#include "bench/openai_stream.h"
#include "bench/workload.h"
#include "cli/bench.h"
#include "cli/verbs.h"
#include "client/failover_client.h"
#include "client/http_client.h"

namespace th::cli {

namespace {

using bench::StreamFn;

struct ServeBenchOptions {
  std::string url, endpoint = "/v1/completions", model;
  bench::WorkloadOptions workload;
  int64_t num_prompts = 1000;
  double duration_s = 0;
  std::string request_rate = "inf", priority_mix;
  std::string compute_types;  // "fp32,bf16": request i sends compute_type [i % n]
  double burstiness = 1.0;
  int64_t max_concurrency = 0;
  std::vector<std::string> goodput, compare;
  std::string tpot_slo_ms, ttft_slo_ms;  // the same targets as serve's flags: goodput's tpot and ttft
  std::string json_path, html_path;
  std::string sampling;      // OpenAiTarget::sampling
  std::string outputs_path;  // one JSON line per request: what it got, for comparing two runs
  bool no_progress = false;
};

// The transport: POST to the server and hand each SSE data payload to on_event. This is
// the one place that knows the HTTP client (src/client/, th::client::HttpClient).
// No retries: a benchmark counts failures, it does not hide them. The key, when the
// server wants one, comes from $OPENAI_API_KEY (as vLLM's benchmark takes it).
// Several URLs ("A,B"): the load is spread over them, and a stream whose endpoint fails
// goes on through another (client/failover_client.h): what a client of a replicated
// service sees, so failures are then the ones no endpoint could hide.
// `failover`, when the list has several URLs, gets the client (for its counters after the run).
Result<StreamFn> make_http_stream(const std::string& url, int64_t max_concurrency,
                                  std::shared_ptr<client::FailoverClient>* failover) {
  client::HttpClientOptions o;
  o.retry.max_attempts = 1;
  o.max_idle_connections = 1024;
  if (const char* key = std::getenv("OPENAI_API_KEY")) o.bearer_token = key;
  auto check = [](Result<client::Response> r) -> Status {
    if (!r.ok()) return r.status();
    if (r->status != 200) {
      std::string first = r->body.substr(0, r->body.find('\n')).substr(0, 300);
      return Status::errorf("HTTP ", r->status, ": ", first);
    }
    return ok_status();
  };
  if (url.find(',') != std::string::npos) {
    client::FailoverOptions f;
    f.http = o;
    // An endpoint that dies takes every request in flight through it, and each may go once
    // to another (Envoy sizes its retry budget by active requests the same way); the
    // default burst of 10 would fail the rest of a crowd that only moved (scripts/soak.sh).
    f.budget.capacity = std::max<double>(f.budget.capacity, static_cast<double>(max_concurrency));
    TH_ASSIGN_OR_RETURN(std::unique_ptr<client::FailoverClient> made, client::FailoverClient::create(url, f));
    std::shared_ptr<client::FailoverClient> http = std::move(made);
    *failover = http;
    return StreamFn([http, check](const std::string& path, const std::string& body,
                                  const std::function<bool(std::string_view)>& on_event) -> Status {
      return check(http->stream_events("POST", path, body, [&](const client::SseEvent& e) { return on_event(e.data); },
                                       {{"Content-Type", "application/json"}}));
    });
  }
  TH_ASSIGN_OR_RETURN(std::unique_ptr<client::HttpClient> made, client::HttpClient::create(url, o));
  std::shared_ptr<client::HttpClient> http = std::move(made);
  return StreamFn([http, check](const std::string& path, const std::string& body,
                                const std::function<bool(std::string_view)>& on_event) -> Status {
    return check(http->stream_events("POST", path, body, [&](const client::SseEvent& e) { return on_event(e.data); },
                                     {{"Content-Type", "application/json"}}));
  });
}

Status write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::errorf(path, ": cannot open for writing");
  out << text;
  out.close();
  if (!out) return Status::errorf(path, ": write failed");
  return ok_status();
}

Result<double> parse_rate(const std::string& s) {
  if (s == "inf" || s == "infinity") return std::numeric_limits<double>::infinity();
  size_t used = 0;
  double r = 0;
  try {
    r = std::stod(s, &used);
  } catch (...) {
    used = 0;
  }
  if (used != s.size() || s.empty() || !(r > 0)) return Status::errorf("--request-rate: '", s, "' is not > 0 or inf");
  return r;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The longest wait between two content chunks, or from the send to the first: what a failure
// that the stream lived through added.
double max_gap_s(const bench::RequestRecord& r) {
  double gap = 0, last = r.send_s;
  for (double t : r.token_times_s) {
    gap = std::max(gap, t - last);
    last = t;
  }
  return gap;
}

// --outputs: one line per request, by index: its outcome, times on the system clock (to match
// with servers' logs and a fault schedule) and its text (to compare with another run's).
std::string outputs_jsonl(const bench::LoadResult& result, const bench::OpenAiTarget& target) {
  std::string out;
  for (const bench::RequestRecord& r : result.records) {
    nlohmann::json line = {{"index", r.index},
                           {"ok", r.ok},
                           {"error", r.error},
                           {"priority", r.priority},
                           {"sampling", bench::sampling_of(target, r.index)},
                           {"send_unix_s", result.start_unix_s + r.send_s},
                           {"end_unix_s", result.start_unix_s + r.end_s},
                           {"output_tokens", r.output_tokens},
                           {"max_gap_s", max_gap_s(r)},
                           {"text", r.text}};
    out += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  return out;
}

int run_compare(const ServeBenchOptions& o) {
  Result<nlohmann::json> a = bench::read_stats_json(o.compare[0]);
  if (!a.ok()) return fail("bench serve", a.message());
  Result<nlohmann::json> b = bench::read_stats_json(o.compare[1]);
  if (!b.ok()) return fail("bench serve", b.message());
  std::fputs(bench::compare_table(*a, *b, o.compare[0], o.compare[1]).c_str(), stdout);
  return 0;
}

int run_bench_serve(ServeBenchOptions o) {
  if (!o.compare.empty()) return run_compare(o);
  if (o.url.empty()) return fail("bench serve", "--url is required (or --compare A.json B.json)");
  if (o.endpoint.empty() || o.endpoint[0] != '/') return fail("bench serve", "--endpoint must be a path starting with '/'");
  Result<double> rate = parse_rate(o.request_rate);
  if (!rate.ok()) return fail("bench serve", rate.message());
  if (!o.priority_mix.empty()) {
    Result<bench::PriorityMix> mix = bench::parse_priority_mix(o.priority_mix);
    if (!mix.ok()) return fail("bench serve", mix.message());
    o.workload.priorities = *mix;
  }
  // serve's flag names for goodput's targets, so one pair of values goes to both.
  if (!o.tpot_slo_ms.empty()) o.goodput.push_back("tpot:" + o.tpot_slo_ms);
  if (!o.ttft_slo_ms.empty()) o.goodput.push_back("ttft:" + o.ttft_slo_ms);
  Result<bench::GoodputTargets> goodput = bench::parse_goodput(o.goodput);
  if (!goodput.ok()) return fail("bench serve", goodput.message());
  Result<std::unique_ptr<bench::Workload>> workload = bench::make_workload(o.workload);
  if (!workload.ok()) return fail("bench serve", workload.message());

  bench::LoadOptions load;
  load.num_prompts = o.num_prompts;
  load.duration_s = o.duration_s;
  load.request_rate = *rate;
  load.burstiness = o.burstiness;
  load.max_concurrency = o.max_concurrency;
  load.seed = o.workload.seed;

  nlohmann::json config = {{"url", o.url},
                           {"endpoint", o.endpoint},
                           {"model", o.model},
                           {"workload", (*workload)->describe()},
                           {"num_prompts", o.num_prompts},
                           {"duration_s", o.duration_s},
                           {"request_rate", std::isinf(*rate) ? nlohmann::json("inf") : nlohmann::json(*rate)},
                           {"burstiness", o.burstiness},
                           {"max_concurrency", o.max_concurrency},
                           {"priority_mix", o.priority_mix},
                           {"compute_types", o.compute_types},
                           {"ignore_eos", o.workload.ignore_eos},
                           {"seed", o.workload.seed},
                           {"started_at", utc_now()}};

  std::shared_ptr<client::FailoverClient> failover;
  Result<StreamFn> stream = make_http_stream(o.url, o.max_concurrency, &failover);
  if (!stream.ok()) return fail("bench serve", stream.message());
  bench::OpenAiTarget target;
  target.endpoint = o.endpoint;
  target.model = o.model;
  target.send_priority = o.workload.priorities.given;
  target.sampling = o.sampling;
  target.sampling_seed = o.workload.seed;
  target.keep_text = !o.outputs_path.empty();
  for (size_t at = 0; !o.compute_types.empty() && at <= o.compute_types.size();) {
    const size_t comma = std::min(o.compute_types.find(',', at), o.compute_types.size());
    target.compute_types.push_back(o.compute_types.substr(at, comma - at));  // the server validates each
    at = comma + 1;
  }
  const StreamFn transport = std::move(*stream);
  const bench::Sender send = [&transport, &target](const bench::BenchRequest& r) {
    return bench::run_openai_stream(transport, r, target);
  };

  // A terminal gets one line redrawn 4 times a second; a log gets a line every 10 s.
  const bool tty = isatty(STDERR_FILENO) != 0;
  if (!o.no_progress) {
    load.progress_interval_s = tty ? 0.25 : 10.0;
    load.on_progress = [tty](const bench::LoadProgress& p) {
      const std::string line = bench::format_progress(p);
      if (tty) std::fprintf(stderr, "\r%s\x1b[K%s", line.c_str(), p.final ? "\n" : "");
      else std::fprintf(stderr, "%s\n", line.c_str());
    };
  }
  std::fprintf(stderr, "bench serve: %s%s, %s\n", o.url.c_str(), o.endpoint.c_str(), (*workload)->describe().c_str());
  Result<bench::LoadResult> result = bench::run_load(**workload, send, load);
  if (!result.ok()) return fail("bench serve", result.message());

  const bench::BenchStats stats = bench::compute_stats(result->records, result->duration_s, *goodput);
  const std::string title = cat(o.url, o.endpoint, "  ", (*workload)->describe());
  std::fputs(bench::stats_table(stats, title).c_str(), stdout);
  // Joules per token need the server machine's counters (RAPL under /sys/class/powercap, or
  // nvidia-smi), which a client cannot read: say so rather than estimate.
  std::fputs("bench serve: energy not measured (a client cannot read the server's RAPL or GPU counters); no joules "
             "per token\n",
             stderr);
  if (failover) {
    const client::FailoverStats f = failover->stats();
    std::fprintf(stderr, "bench serve: failover: %llu tries after a first, %llu streams resumed on another endpoint\n",
                 static_cast<unsigned long long>(f.failovers), static_cast<unsigned long long>(f.resumes));
  }
  std::fflush(stdout);
  if (!o.json_path.empty()) {
    Status st = write_file(o.json_path, bench::stats_json(stats, config).dump(2) + "\n");
    if (!st.ok()) return fail("bench serve", st.message());
  }
  if (!o.outputs_path.empty()) {
    Status st = write_file(o.outputs_path, outputs_jsonl(*result, target));
    if (!st.ok()) return fail("bench serve", st.message());
  }
  if (!o.html_path.empty()) {
    Status st = write_file(o.html_path, bench::html_report(result->records, stats, config, "tokenhive bench serve: " + title));
    if (!st.ok()) return fail("bench serve", st.message());
  }
  return stats.all.completed > 0 ? 0 : 1;
}

}  // namespace

BenchSubcommand add_bench_serve(CLI::App& bench) {
  auto f = std::make_shared<ServeBenchOptions>();
  ServeBenchOptions& o = *f;
  CLI::App* app = bench.add_subcommand(
      "serve", "Load-test an OpenAI-compatible server: TTFT, TPOT, ITL, E2E, throughput, goodput (vLLM's bench serve).");
  app->add_option("--url,--base-url", o.url,
                  "the server, e.g. http://127.0.0.1:8080; several, comma-separated, share the load and take over each other's streams");
  app->add_option("--endpoint", o.endpoint, "the streaming endpoint (/v1/completions, or /v1/chat/completions)");
  app->add_option("--model", o.model, "the model field of each request (default: none sent, the server's one model)");
  app->add_option("--dataset-name", o.workload.kind, "random | shared-prefix | jsonl")
      ->check(CLI::IsMember({"random", "shared-prefix", "jsonl"}));
  app->add_option("--dataset-path", o.workload.dataset_path, "jsonl: one {\"prompt\": ..., \"max_tokens\": N} per line");
  app->add_option("--random-input-len", o.workload.input_len, "prompt tokens (shared-prefix: after the prefix)");
  app->add_option("--random-output-len", o.workload.output_len, "tokens to generate per request");
  app->add_option("--random-range-ratio", o.workload.range_ratio,
                  "lengths uniform in [len*(1-r), len*(1+r)], r in [0, 1)");
  app->add_option("--prefix-len", o.workload.prefix_len, "shared-prefix: tokens of each shared prefix");
  app->add_option("--num-prefixes", o.workload.num_prefixes, "shared-prefix: distinct prefixes, used in turn");
  app->add_option("--num-prompts", o.num_prompts, "requests to send (default 1000; with --duration alone: no limit)");
  app->add_option("--duration", o.duration_s, "seconds after which no request is sent (in-flight ones finish)");
  app->add_option("--request-rate", o.request_rate, "requests/s, or inf to send all at once");
  app->add_option("--burstiness", o.burstiness, "gamma shape of the inter-arrival times (1: Poisson)");
  app->add_option("--max-concurrency", o.max_concurrency, "requests in flight at most (0: no cap)");
  app->add_option("--seed", o.workload.seed, "seed of prompts, lengths, priorities and arrivals");
  app->add_option("--priority-mix", o.priority_mix, "e.g. high=0.1,normal=0.8,low=0.1 (sends `priority`)");
  app->add_option("--compute-types", o.compute_types,
                  "e.g. fp32,bf16,fp16,fp8: request i sends compute_type number i % 4 (tokenhive's field)");
  app->add_option("--sampling", o.sampling,
                  "greedy (temperature 0), seeded (temperature 1, seed --seed + request index) or mixed (even requests "
                  "greedy, odd seeded): outputs a second run reproduces (default: the server's sampling)")
      ->check(CLI::IsMember({"greedy", "seeded", "mixed"}));
  app->add_option("--outputs", o.outputs_path,
                  "write each request's outcome, times (Unix seconds) and generated text as JSON lines");
  app->add_option("--goodput", o.goodput, "targets in ms: ttft:MS tpot:MS e2el:MS")->expected(1, 3);
  app->add_option("--tpot-slo-ms", o.tpot_slo_ms, "goodput's TPOT target (as --goodput tpot:MS; serve's flag name)");
  app->add_option("--ttft-slo-ms", o.ttft_slo_ms, "goodput's TTFT target (as --goodput ttft:MS)");
  app->add_flag("--ignore-eos,!--no-ignore-eos", o.workload.ignore_eos,
                "ask the server to generate exactly max_tokens (default on)");
  app->add_option("--json", o.json_path, "write the result as JSON");
  app->add_option("--html", o.html_path, "write a self-contained HTML report");
  app->add_option("--compare", o.compare, "print two --json results side by side (B/A) and exit")->expected(2);
  app->add_flag("--no-progress", o.no_progress, "no progress line on stderr");
  return {app, [f, app] {
            ServeBenchOptions opts = *f;
            // --duration alone bounds the run by time only, as the flag's help says.
            if (app->count("--duration") > 0 && app->count("--num-prompts") == 0) opts.num_prompts = 0;
            return run_bench_serve(std::move(opts));
          }};
}

}  // namespace th::cli
