// `tokenhive bench model` as a user runs it: a real process on small models,
// its --json output parsed back. Speeds are not checked (the machine is
// shared); that they are positive, finite, and consistent with the reported
// ceilings is. Probe sizes are tiny so each run takes well under a second.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "backend/cpu/matmul_kernels.h"
#include "run_process.h"
#include "test_util.h"

namespace th {
namespace {

using Json = nlohmann::json;
using test::ProcessResult;
using test::run_process;

using test::stories;

int count_lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// Small but complete: every test runs, twice each.
std::vector<std::string> bench_args(const std::string& model, std::vector<std::string> extra) {
  std::vector<std::string> a = {test::binary_path(), "bench", "model", "-m", model, "--threads", "2",
                                "--prompt", "32", "--ubatch", "16", "--gen", "8", "--batch-gen", "4",
                                "--reps", "2", "--probe-mib", "8", "--probe-ms", "5", "--probe-reps", "2"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

Json run_json(const std::vector<std::string>& args) {
  ProcessResult r = run_process(args, 120);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Exactly one JSON object: parse() fails on anything after it but whitespace.
  Json j = Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(j.is_object()) << r.out;
  return j;
}

double positive(const Json& j, const std::string& key) {
  EXPECT_TRUE(j.contains(key)) << key;
  if (!j.contains(key) || !j[key].is_number()) {
    ADD_FAILURE() << key << " is not a number: " << (j.contains(key) ? j[key].dump() : "missing");
    return 0;
  }
  const double v = j[key].get<double>();
  EXPECT_TRUE(std::isfinite(v) && v > 0) << key << " = " << v;
  return v;
}

void expect_consistent_run(const Json& j, const Json& m, const std::vector<int>& batches, int reps,
                           const std::vector<int>& contexts, double compute, double bw);

// Recomputes every ceiling and percentage from the numbers the JSON reports, in every
// ISA's run; `contexts` are the decode contexts asked for.
void expect_consistent(const Json& j, const std::vector<int>& batches, int reps,
                       const std::vector<int>& contexts = {8}) {
  const Json& m = j["model"];
  for (const char* k : {"name", "arch", "type", "path"}) EXPECT_TRUE(m[k].is_string()) << k;
  const double params = positive(m, "params"), weight_bytes = positive(m, "weight_bytes");
  const double per_token = positive(m, "weight_bytes_per_token");
  const double matrix = positive(m, "matrix_bytes"), lookup = positive(m, "lookup_bytes_per_token");
  EXPECT_EQ(per_token, matrix + lookup);
  EXPECT_LE(per_token, weight_bytes);
  EXPECT_GT(params, 0);
  const double int8_ops = m["int8_ops_per_token"].get<double>(), flops = m["fp32_flops_per_token"].get<double>();
  EXPECT_GT(int8_ops + flops, 0);
  EXPECT_EQ(j["threads"], 2);
  EXPECT_EQ(j["decode_context_tokens"], Json(contexts));

  const double bw = positive(j, "bandwidth_gb_per_s"), int8 = positive(j, "int8_peak_gops"),
               fp32 = positive(j, "fp32_peak_gflops");
  const double compute = 1.0 / (int8_ops / (int8 * 1e9) + flops / (fp32 * 1e9));
  ASSERT_TRUE(j["runs"].is_array());
  ASSERT_FALSE(j["runs"].empty());
  for (const Json& run : j["runs"]) expect_consistent_run(run, m, batches, reps, contexts, compute, bw);
}

void expect_consistent_run(const Json& j, const Json& m, const std::vector<int>& batches, int reps,
                           const std::vector<int>& contexts, double compute, double bw) {
  auto near = [](double got, double want) { EXPECT_NEAR(got, want, 1e-9 * std::abs(want)); };
  const double per_token = m["weight_bytes_per_token"].get<double>(), matrix = m["matrix_bytes"].get<double>(),
               lookup = m["lookup_bytes_per_token"].get<double>();
  ASSERT_TRUE(j["isa"].is_string());
  EXPECT_TRUE(j["backend"].is_string());
  // The kernel of the model's main type is named, with the ISA it runs at.
  ASSERT_TRUE(j["kernels"].contains(m["type"].get<std::string>())) << j["kernels"].dump();
  EXPECT_NE(j["kernels"][m["type"].get<std::string>()].get<std::string>().find(m["type"].get<std::string>()),
            std::string::npos);
  for (int c : contexts) {
    positive(j["decode_at_context_tokens_per_s"], std::to_string(c));
    EXPECT_EQ(j["samples"]["decode_at_context_tokens_per_s"][std::to_string(c)].size(), static_cast<size_t>(reps));
  }
  EXPECT_EQ(j["decode_at_context_tokens_per_s"].size(), contexts.size());
  EXPECT_EQ(j["decode_at_context_tokens_per_s"][std::to_string(contexts.front())], j["decode_tokens_per_s"]);

  const double prefill = positive(j, "prefill_tokens_per_s");
  near(positive(j, "prefill_ceiling_tokens_per_s"), compute);
  near(positive(j, "prefill_pct_of_ceiling"), 100.0 * prefill / compute);

  const double decode = positive(j, "decode_tokens_per_s");
  const double decode_ceiling = std::min(bw * 1e9 / per_token, compute);
  near(positive(j, "decode_ceiling_tokens_per_s"), decode_ceiling);
  near(positive(j, "decode_pct_of_ceiling"), 100.0 * decode / decode_ceiling);

  const Json& tps = j["batched_decode_tokens_per_s"];
  ASSERT_TRUE(tps.is_object());
  std::vector<std::string> want_keys, got_keys;
  for (int b : batches) want_keys.push_back(std::to_string(b));
  for (const auto& [k, v] : tps.items()) got_keys.push_back(k);
  std::sort(want_keys.begin(), want_keys.end());
  std::sort(got_keys.begin(), got_keys.end());
  EXPECT_EQ(got_keys, want_keys);
  for (int b : batches) {
    const std::string k = std::to_string(b);
    const double v = positive(tps, k);
    const double ceiling = std::min(b * bw * 1e9 / (matrix + b * lookup), compute);
    near(positive(j["batched_decode_ceiling_tokens_per_s"], k), ceiling);
    near(positive(j["batched_decode_pct_of_ceiling"], k), 100.0 * v / ceiling);
    EXPECT_EQ(j["samples"]["batched_decode_tokens_per_s"][k].size(), static_cast<size_t>(reps));
    if (b == 1) {
      EXPECT_EQ(v, decode);
    }
  }
  EXPECT_EQ(j["samples"]["prefill_tokens_per_s"].size(), static_cast<size_t>(reps));
  EXPECT_EQ(j["samples"]["decode_tokens_per_s"].size(), static_cast<size_t>(reps));
}

TEST(BenchModelCli, JsonOnAFloatModelHasEveryFieldAndConsistentCeilings) {
  const Json j = run_json(bench_args(stories(), {"--batch", "4,1,2", "--json"}));
  ASSERT_TRUE(j.is_object());
  expect_consistent(j, {1, 2, 4}, 2);
  EXPECT_EQ(j["model"]["type"], "f32");
  EXPECT_EQ(j["model"]["int8_ops_per_token"], 0);
  EXPECT_EQ(j["prompt_tokens"], 32);
  // The probes ran, and the peaks are their best repetitions.
  EXPECT_EQ(j["bandwidth_gb_per_s"], j["probes"]["bandwidth"]["read_best_gb_per_s"]);
  EXPECT_EQ(j["int8_peak_gops"], j["probes"]["int8_dot"]["best_gops"]);
  EXPECT_EQ(j["fp32_peak_gflops"], j["probes"]["fp32_fma"]["best_gops"]);
  EXPECT_GE(j["probes"]["bandwidth"]["read_best_gb_per_s"].get<double>(),
            j["probes"]["bandwidth"]["read_median_gb_per_s"].get<double>());
}

// --probe-each-rep: a probe before each decode rep (batch 1 and the batched runs), and each
// rep's % of the ceiling at its own probe (the main figures stay against the one probe at the
// start).
TEST(BenchModelCli, ProbeEachRepReportsEachRepAgainstItsOwnProbe) {
  const Json j = run_json(bench_args(stories(), {"--batch", "1,2", "--json", "--probe-each-rep"}));
  ASSERT_TRUE(j.is_object());
  expect_consistent(j, {1, 2}, 2);
  const Json& model = j["model"];
  const double matrix = model["matrix_bytes"].get<double>(), lookup = model["lookup_bytes_per_token"].get<double>();
  const Json& run = j["runs"][0];
  const double int8 = j["int8_peak_gops"].get<double>(), fp32 = j["fp32_peak_gflops"].get<double>();
  const double flops = model["fp32_flops_per_token"].get<double>(), ops = model["int8_ops_per_token"].get<double>();
  const double compute = 1.0 / (ops / (int8 * 1e9) + flops / (fp32 * 1e9));
  // Each rep's % against the ceiling of a batch of b at its own probe; returns their median.
  auto check = [&](const Json& probes, const Json& pcts, const Json& samples, int b) {
    EXPECT_EQ(probes.size(), 2u) << run.dump();
    EXPECT_EQ(pcts.size(), 2u);
    EXPECT_EQ(samples.size(), 2u);
    std::vector<double> p;
    for (size_t i = 0; i < 2 && i < probes.size() && i < pcts.size() && i < samples.size(); ++i) {
      const double bw = probes[i].get<double>();
      EXPECT_GT(bw, 0);
      const double ceiling = std::min(b * bw * 1e9 / (matrix + b * lookup), compute);
      EXPECT_NEAR(pcts[i].get<double>(), 100.0 * samples[i].get<double>() / ceiling, 1e-9 * pcts[i].get<double>());
      p.push_back(pcts[i].get<double>());
    }
    return p.size() == 2 ? 0.5 * (p[0] + p[1]) : 0.0;
  };
  const double m1 = check(run["decode_rep_probe_gb_per_s"], run["decode_rep_pct_of_ceiling"],
                          run["samples"]["decode_tokens_per_s"], 1);
  EXPECT_NEAR(run["decode_pct_of_rep_ceilings"].get<double>(), m1, 1e-9 * m1);  // the median
  check(run["batched_rep_probe_gb_per_s"]["2"], run["batched_rep_pct_of_ceiling"]["2"],
        run["samples"]["batched_decode_tokens_per_s"]["2"], 2);
  EXPECT_FALSE(run["batched_rep_probe_gb_per_s"].contains("1"));  // batch 1 is the decode run's
  // Without the flag, no such fields.
  const Json k = run_json(bench_args(stories(), {"--batch", "1", "--json", "--no-probe", "--bandwidth-gbps", "10"}));
  EXPECT_FALSE(k["runs"][0].contains("decode_rep_probe_gb_per_s"));
  EXPECT_FALSE(k["runs"][0].contains("batched_rep_probe_gb_per_s"));
}

TEST(BenchModelCli, JsonOnAQuantizedSyntheticModelCountsIntegerWork) {
  // 64 wide, 2 layers, 4 heads, 2 KV heads, n_ff 96, 32000-token vocab, q8_0: 2,109,440 MACs per
  // token (forward_cost_test works the count out), all on the integer unit.
  const std::string path = ::testing::TempDir() + "/th_bench_q8_0.gguf";
  ProcessResult mk = run_process({test::binary_path(), "mkmodel", "--shape", "custom", "--dim", "64", "--layers", "2",
                                  "--heads", "4", "--kv-heads", "2", "--ffn", "96", "--type", "q8_0", "-o", path});
  ASSERT_EQ(mk.exit_code, 0) << mk.err;
  const Json j = run_json(bench_args(path, {"--batch", "1,3", "--json"}));
  ASSERT_TRUE(j.is_object());
  expect_consistent(j, {1, 3}, 2);
  EXPECT_EQ(j["model"]["type"], "q8_0");
  EXPECT_EQ(j["model"]["int8_ops_per_token"], 2 * 2'109'440);
  EXPECT_EQ(j["model"]["fp32_flops_per_token"], 0);
  EXPECT_EQ(j["model"]["weight_bytes_per_token"], 2'109'440 / 32 * 34 + 68);
  EXPECT_EQ(j["model"]["n_vocab"], 32000);
  ::unlink(path.c_str());
}

TEST(BenchModelCli, EveryIsaAndEveryContextGetARun) {
  // --isa all: one run per SIMD ISA this CPU runs (generic only where there is none), each
  // naming the kernel it ran; a decode speed at each --context.
  const Json j = run_json(bench_args(stories(), {"--batch", "1,2", "--json", "--isa", "all", "--context", "8,40"}));
  ASSERT_TRUE(j.is_object());
  expect_consistent(j, {1, 2}, 2, {8, 40});
  const std::vector<cpu::Isa>& have = cpu::available_isas();
  std::vector<std::string> want;
  for (size_t i = have.size() > 1 ? 1 : 0; i < have.size(); ++i) want.emplace_back(cpu::isa_name(have[i]));
  std::vector<std::string> got;
  for (const Json& run : j["runs"]) {
    got.push_back(run["isa"]);
    EXPECT_NE(run["kernels"]["f32"].get<std::string>().find(run["isa"].get<std::string>()), std::string::npos)
        << run["kernels"].dump();
    // The quantized tiles' weight-stream prefetch this CPU gets (the same rule and environment here).
    if (run["isa"] != "generic")
      EXPECT_EQ(run.value("weight_stream_prefetch", ""),
                std::string(cpu::stream_prefetch_name(cpu::stream_prefetch())));
  }
  EXPECT_EQ(got, want);

  // Names, in the order given; the table has a block per ISA.
  const Json g = run_json(bench_args(stories(), {"--batch", "1", "--json", "--isa", "generic"}));
  ASSERT_EQ(g["runs"].size(), 1u);
  EXPECT_EQ(g["runs"][0]["isa"], "generic");
  EXPECT_EQ(g["runs"][0]["kernels"]["f32"], "f32 x f32 generic");
  EXPECT_FALSE(g["runs"][0].contains("weight_stream_prefetch")) << g["runs"][0].dump();  // no prefetch there
}

TEST(BenchModelCli, GivenLimitsReplaceTheProbes) {
  const Json j = run_json(bench_args(stories(), {"--batch", "1", "--json", "--no-probe", "--bandwidth-gbps", "10",
                                                 "--int8-gops", "100", "--fp32-gflops", "50"}));
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["bandwidth_gb_per_s"], 10.0);
  EXPECT_EQ(j["int8_peak_gops"], 100.0);
  EXPECT_EQ(j["fp32_peak_gflops"], 50.0);
  EXPECT_TRUE(j["probes"].empty()) << j["probes"].dump();
  expect_consistent(j, {1}, 2);

  // Overriding one limit still measures the others.
  const Json k = run_json(bench_args(stories(), {"--batch", "1", "--json", "--bandwidth-gbps", "10"}));
  EXPECT_EQ(k["bandwidth_gb_per_s"], 10.0);
  EXPECT_FALSE(k["probes"].contains("bandwidth"));
  EXPECT_TRUE(k["probes"].contains("int8_dot"));
}

TEST(BenchModelCli, NoProbeLeavesUnknownCeilingsNull) {
  const Json j = run_json(bench_args(stories(), {"--batch", "1,2", "--json", "--no-probe"}));
  ASSERT_TRUE(j.is_object());
  for (const char* k : {"bandwidth_gb_per_s", "int8_peak_gops", "fp32_peak_gflops"}) EXPECT_TRUE(j[k].is_null()) << k;
  const Json& run = j["runs"][0];
  EXPECT_GT(run["prefill_tokens_per_s"].get<double>(), 0);
  for (const char* k : {"prefill_pct_of_ceiling", "decode_pct_of_ceiling", "decode_ceiling_tokens_per_s"})
    EXPECT_TRUE(run[k].is_null()) << k;
  EXPECT_TRUE(run["batched_decode_pct_of_ceiling"]["2"].is_null());
}

TEST(BenchModelCli, TableByDefault) {
  ProcessResult r = run_process(bench_args(stories(), {"--batch", "1,2"}), 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* needle : {"machine", "prefill 32", "decode 8 @ 8 (batch 1)", "decode batch 2 x 4", "tokens/s", "ceiling"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
  EXPECT_NE(r.out.front(), '{');
}

TEST(BenchModelCli, HelpListsTheFlags) {
  ProcessResult r = run_process({test::binary_path(), "bench", "model", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* needle : {"--batch", "--prompt", "--gen", "--reps", "--json", "--no-probe", "--bandwidth-gbps"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle;
}

TEST(BenchModelCli, BadFlagsAreOneLineErrorsWithExitCode2) {
  const std::vector<std::vector<std::string>> cases = {
      {"bench"},
      {"bench", "nosuch"},
      {"bench", "model", "--batch", "0"},
      {"bench", "model", "--batch", "1,x"},
      {"bench", "model", "--batch", "1,,8"},
      {"bench", "model", "--threads", "0"},
      {"bench", "model", "--reps", "0"},
      {"bench", "model", "--prompt", "-5"},
      {"bench", "model", "--ubatch", "100000"},
      {"bench", "model", "--bandwidth-gbps", "-1"},
      {"bench", "model", "--int8-gops", "zero"},
      {"bench", "model", "--no-such-flag"},
      {"bench", "model", "--isa", "sse9"},
      {"bench", "model", "--isa", "avx2,"},
      {"bench", "model", "--context", "0"},
      {"bench", "model", "--context", "8,x"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {test::binary_path()};
    argv.insert(argv.end(), c.begin(), c.end());
    if (c.size() > 1 && c[1] == "model") argv.insert(argv.end(), {"-m", stories()});
    ProcessResult r = run_process(argv, 30);
    const std::string what = c.back();
    EXPECT_EQ(r.exit_code, 2) << what << ": " << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << what << ": " << r.err;
    EXPECT_EQ(r.err.rfind("tokenhive bench", 0), 0u) << what << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << what << ": " << r.out;
  }
}

TEST(BenchModelCli, MissingModelIsAOneLineError) {
  ProcessResult r = run_process({test::binary_path(), "bench", "model", "-m", "/nonexistent/model.gguf", "--json"}, 30);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

}  // namespace
}  // namespace th
