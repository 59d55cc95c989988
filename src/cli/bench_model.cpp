// tokenhive bench model: how fast a model prefills and decodes on this machine,
// and how close that is to what the machine allows. The ceilings come from the
// machine's own measured bandwidth and peaks (machine_limits) and the model's
// bytes and MACs per token (forward_cost). Medians of --reps repetitions; a
// table on stdout, or with --json exactly one JSON object; progress on stderr.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/kernel_select.h"
#include "backend/cpu/machine_limits.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cuda/cuda_backend.h"
#include "cli/bench.h"
#include "cli/compute_types.h"
#include "cli/device.h"
#include "cli/verbs.h"
#include "engine/compute_accuracy.h"
#include "engine/generator.h"
#include "engine/model_bench.h"
#include "format/gguf.h"
#include "kv/kv_dtype.h"
#include "model/encrypted_model.h"
#include "model/forward_cost.h"
#include "model/llama_model.h"
#include "model/model_path.h"
#include "tokenizer/tokenizer.h"

namespace th::cli {

namespace {

using Json = nlohmann::ordered_json;

constexpr int64_t kMaxContext = 65536;

struct BenchModelFlags {
  std::string model;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string batch_list = "1,8,32";
  std::vector<int64_t> batches;  // batch_list parsed, sorted, without repeats
  // Decode starts after this many prompt tokens per sequence (prefilled untimed). The
  // first is the headline and the batched runs' context: 8 gives attention a little
  // context, as in real use, without prefill dominating the run; 4096 or 16384 show
  // what attention costs at long context.
  std::string context_list = "8";
  std::vector<int64_t> contexts;  // in the order given
  std::string isa_list = "best";
  std::vector<cpu::Isa> isas;  // isa_list parsed
  int64_t prompt = 512, ubatch = 512, gen = 128, batch_gen = 32;
  int reps = 3;
  uint64_t seed = 1234;
  bool json = false, no_probe = false, probe_each_rep = false;
  double bandwidth_gbps = 0, int8_gops = 0, fp32_gflops = 0;  // 0: measure (unless --no-probe)
  int64_t probe_mib = 2048;
  int probe_reps = 5;
  double probe_ms = 100;
  std::string compute_type = "native";
  int64_t accuracy_tokens = 128;
  std::string kv_type = "f16";  // llama-bench's default (-ctk/-ctv f16)
  std::string device = "cpu";
};

DType kv_type_of(const BenchModelFlags& f) { return kv_dtype_from_name(f.kv_type).value_or(DType::F16); }

// The backend under test: --device's, the CPU one with --threads workers at one ISA.
Result<std::unique_ptr<Backend>> make_bench_backend(const BenchModelFlags& f, cpu::Isa isa) {
  CpuBackendOptions o;
  o.n_threads = f.threads;
  o.isa = isa;
  return make_device_backend(f.device, o);
}

// "a,b,c" -> its items ("a,,b" has an empty one, which the callers refuse).
std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (true) {
    const size_t comma = std::min(s.find(',', at), s.size());
    out.push_back(s.substr(at, comma - at));
    if (comma == s.size()) return out;
    at = comma + 1;
  }
}

// "1,8,32" -> {1, 8, 32}: integers from 1 to max, in the order given.
Result<std::vector<int64_t>> parse_int_list(const std::string& s, int64_t max, const char* what) {
  std::vector<int64_t> out;
  for (const std::string& item : split_commas(s)) {
    if (item.empty() || item.size() > 6 || item.find_first_not_of("0123456789") != std::string::npos ||
        std::stoll(item) < 1 || std::stoll(item) > max)
      return Status::errorf("'", item, "' is not a ", what, " from 1 to ", max);
    out.push_back(std::stoll(item));
  }
  return out;
}

Result<std::vector<int64_t>> parse_batch_list(const std::string& s) {
  TH_ASSIGN_OR_RETURN(std::vector<int64_t> out, parse_int_list(s, 4096, "batch size"));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// "best" (the backend's own choice), "all" (every SIMD ISA this CPU runs; the plain
// generic kernels only when they are all there is: they are the reference, tens of times
// slower) or names: "avx2,avx512".
Result<std::vector<cpu::Isa>> parse_isa_list(const std::string& s) {
  const std::vector<cpu::Isa>& have = cpu::available_isas();
  if (s == "best") return std::vector<cpu::Isa>{cpu::best_isa()};
  if (s == "all") {
    std::vector<cpu::Isa> simd(have.begin() + (have.size() > 1 ? 1 : 0), have.end());
    return simd;
  }
  std::vector<cpu::Isa> out;
  for (const std::string& item : split_commas(s)) {
    auto it = std::find_if(have.begin(), have.end(), [&](cpu::Isa i) { return cpu::isa_name(i) == item; });
    if (it == have.end()) {
      std::string names;
      for (cpu::Isa i : have) names += (names.empty() ? "" : ", ") + std::string(cpu::isa_name(i));
      return Status::errorf("'", item, "' is not an ISA this CPU runs (it runs ", names, "; or best, all)");
    }
    if (std::find(out.begin(), out.end(), *it) == out.end()) out.push_back(*it);
  }
  return out;
}

// A CLI11 check from a parser: its error message, or accepted.
CLI::Validator list_validator(std::function<Status(const std::string&)> parse) {
  return CLI::Validator(
      [parse](std::string& v) {
        Status st = parse(v);
        return st.ok() ? std::string() : st.message();
      },
      "LIST", "list");
}

void progress(const char* fmt, auto... args) {
  std::fprintf(stderr, "bench: ");
  std::fprintf(stderr, fmt, args...);
  std::fputc('\n', stderr);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A measured speed: every repetition's tokens/s and their median.
struct Speed {
  std::vector<double> samples;
  double median = 0;
};

// Whether a run was on the CUDA backend (--device cuda, or auto where a GPU answered).
bool on_gpu(std::string_view backend_name) { return backend_name == "cuda"; }

// A JSON number, or null where a ceiling is unknown (JSON has no NaN or infinity).
Json number_or_null(double v) { return std::isfinite(v) && v > 0 ? Json(v) : Json(nullptr); }
double pct(double value, double ceiling) { return ceiling > 0 ? 100.0 * value / ceiling : 0; }

struct ModelInfo {
  std::string name, arch, type;
  uint64_t params = 0, weight_bytes = 0;
};

ModelInfo model_info(const GgufFile& f, const ModelConfig& c, const std::vector<MatrixRead>& reads) {
  ModelInfo m;
  Result<std::string> name = f.get_string("general.name");
  m.name = name.ok() ? *name : f.name();
  m.arch = c.arch_name;
  for (const GgufTensor& t : f.tensors()) {
    m.params += static_cast<uint64_t>(t.n_elements());
    m.weight_bytes += t.nbytes;
  }
  // The model's type: the one that holds most of the bytes read per token.
  std::map<DType, uint64_t> bytes;
  for (const MatrixRead& r : reads)
    bytes[r.type] += row_bytes(r.type, r.cols) * static_cast<uint64_t>(r.lookup ? 1 : r.rows);
  m.type = dtype_name(std::max_element(bytes.begin(), bytes.end(), [](auto& a, auto& b) { return a.second < b.second; })->first);
  return m;
}

template <class F>
Result<Speed> repeat(int reps, double tokens, const char* what, F&& seconds) {
  Speed s;
  for (int r = 0; r < reps; ++r) {
    TH_ASSIGN_OR_RETURN(double t, seconds());
    s.samples.push_back(tokens / t);
    progress("%s rep %d/%d: %.2f tokens/s", what, r + 1, reps, s.samples.back());
  }
  s.median = median(s.samples);
  return s;
}

// The bandwidth probe (--probe-mib, --threads, --probe-reps); on a GPU, its memory's read
// bandwidth (best and median both the best pass; no triad).
Result<cpu::BandwidthResult> probe_bandwidth(const BenchModelFlags& f, bool gpu) {
  if (gpu) {
    TH_ASSIGN_OR_RETURN(double gbps, cuda_read_bandwidth_gbps(static_cast<size_t>(f.probe_mib) << 20, f.probe_reps));
    cpu::BandwidthResult r;
    r.read_gb_per_s.best = r.read_gb_per_s.median = gbps;
    r.total_bytes = static_cast<size_t>(f.probe_mib) << 20;
    return r;
  }
  cpu::BandwidthOptions o;
  o.total_bytes = static_cast<size_t>(f.probe_mib) << 20;
  o.n_threads = f.threads;
  o.reps = f.probe_reps;
  return cpu::measure_bandwidth(o);
}

// The machine's limits (bandwidth, int8 and fp32 peaks), measured unless given by flags;
// `probes` gets what each probe saw.
Result<MachinePeaks> measure_peaks(const BenchModelFlags& f, cpu::Isa isa, bool gpu, Json& probes) {
  MachinePeaks peaks{f.bandwidth_gbps, f.int8_gops, f.fp32_gflops};
  if (!f.no_probe && peaks.bandwidth_gb_per_s <= 0) {
    progress("bandwidth probe: %lld MiB, %d threads, %d reps%s", static_cast<long long>(f.probe_mib), f.threads,
             f.probe_reps, gpu ? ", GPU memory" : "");
    Result<cpu::BandwidthResult> bw = probe_bandwidth(f, gpu);
    if (!bw.ok()) return bw.status();
    peaks.bandwidth_gb_per_s = bw->read_gb_per_s.best;
    probes["bandwidth"] = {{"read_best_gb_per_s", bw->read_gb_per_s.best},
                           {"read_median_gb_per_s", bw->read_gb_per_s.median},
                           {"triad_best_gb_per_s", bw->triad_gb_per_s.best},
                           {"triad_median_gb_per_s", bw->triad_gb_per_s.median},
                           {"bytes", bw->total_bytes},
                           {"reps", f.probe_reps}};
  }
  auto compute_probe = [&](const char* key, auto measure, double& peak) -> Status {
    if (f.no_probe || peak > 0 || gpu) return ok_status();  // the CPU's peaks; none measured on a GPU yet
    progress("%s probe: %s, %d threads, %d reps", key, std::string(cpu::isa_name(isa)).c_str(), f.threads, f.probe_reps);
    cpu::ComputeOptions o;
    o.n_threads = f.threads;
    o.reps = f.probe_reps;
    o.seconds_per_rep = f.probe_ms / 1000.0;
    o.isa = isa;
    Result<cpu::ComputeResult> r = measure(o);
    if (!r.ok()) return r.status();
    peak = r->gops.best;
    probes[key] = {{"best_gops", r->gops.best}, {"median_gops", r->gops.median}, {"isa", cpu::isa_name(r->isa)},
                   {"reps", f.probe_reps}};
    return ok_status();
  };
  TH_RETURN_IF_ERROR(compute_probe("fp32_fma", cpu::measure_fp32_fma_peak, peaks.fp32_gflops));
  TH_RETURN_IF_ERROR(compute_probe("int8_dot", cpu::measure_int8_dot_peak, peaks.int8_gops));
  return peaks;

}

// What the tests measured at one ISA.
struct IsaRun {
  cpu::Isa isa{};
  std::string backend_name;
  std::map<std::string, std::string> kernels;  // weight type -> the kernel the backend runs
  std::string stream_prefetch;  // the quantized tiles' weight-stream prefetch (l2 | nta); "" on a GPU or generic
  size_t repacked_bytes = 0;                   // weights the backend repacked at load
  Speed prefill;
  std::map<int64_t, Speed> decode;   // by context (positions before the first timed token)
  std::map<int64_t, Speed> batched;  // by batch, at the first context
  // --probe-each-rep: the bandwidth probe's best just before each decode rep (first context),
  // and before each batched rep (by batch).
  std::vector<double> rep_probe_gbps;
  std::map<int64_t, std::vector<double>> batched_rep_probe_gbps;
};

// What one `bench model` run measured, for the JSON and the table.
struct BenchModelRun {
  std::string path;
  ModelInfo info;
  ForwardCost cost;
  ModelConfig config;
  MachinePeaks peaks;
  Json probes = Json::object();
  std::vector<IsaRun> runs;
  ComputeType compute_type = ComputeType::Native;
  std::optional<ComputeAccuracy> accuracy;  // against fp32, for the reduced types
  std::string energy;                       // why there is no joules-per-token figure
};

// Where the machine exposes energy counters; none read yet, so every run says which is absent.
std::string energy_note() {
  std::error_code ec;
  if (!std::filesystem::exists("/sys/class/powercap", ec))
    return "no energy counters: /sys/class/powercap is absent (no RAPL); joules per token not reported";
  return "energy counters under /sys/class/powercap exist but are not read yet; joules per token not reported";
}

// The matrices' reads as the compute type's copy holds them (model/weight_sets.cpp converts every
// matrix whose type differs; lookups stay the file's).
std::vector<MatrixRead> reads_for(std::vector<MatrixRead> reads, ComputeType t) {
  if (const std::optional<DType> to = compute_type_weight_dtype(t))
    for (MatrixRead& m : reads)
      if (!m.lookup) m.type = *to;
  return reads;
}

// KL divergence and top-1 agreement of `t` against fp32 over fp32's greedy text from BOS.
Result<ComputeAccuracy> accuracy_vs_fp32(LlamaModel& m, Backend& backend, const GgufFile& file, ComputeType t,
                                         int64_t n_tokens) {
  TH_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::from_gguf(file));
  TH_RETURN_IF_ERROR(m.add_compute_type(ComputeType::Fp32));
  std::vector<int32_t> text = {tok.bos()};
  Generator gen(m, backend, {});
  GenerateOptions o;
  o.max_tokens = n_tokens - 1;
  o.ignore_eos = true;
  o.compute_type = ComputeType::Fp32;
  TH_ASSIGN_OR_RETURN(GenerateStats st, gen.run(text, o, [&](int32_t id) {
    text.push_back(id);
    return true;
  }));
  (void)st;
  return compare_compute_types(m, backend, text, ComputeType::Fp32, t);
}


// --probe-each-rep: each rep of a batch's decode (samples) as a % of the ceiling at its own
// probe (probes).
std::vector<double> rep_pcts(const BenchModelRun& r, const std::vector<double>& samples,
                             const std::vector<double>& probes, int64_t batch) {
  std::vector<double> p;
  for (size_t i = 0; i < samples.size() && i < probes.size(); ++i) {
    MachinePeaks at = r.peaks;
    at.bandwidth_gb_per_s = probes[i];
    p.push_back(pct(samples[i], decode_ceiling_tokens_per_s(r.cost, at, batch)));
  }
  return p;
}

Json speeds_json(const std::map<int64_t, Speed>& m, const std::function<Json(int64_t, const Speed&)>& value) {
  Json o = Json::object();
  for (const auto& [k, s] : m) o[std::to_string(k)] = value(k, s);
  return o;
}

Json run_json(const BenchModelFlags& f, const BenchModelRun& r, const IsaRun& run) {
  const double prefill_ceiling = compute_ceiling_tokens_per_s(r.cost, r.peaks);
  const double decode_ceiling = decode_ceiling_tokens_per_s(r.cost, r.peaks, 1);
  const Speed& decode = run.decode.at(f.contexts.front());
  Json j;
  j["isa"] = cpu::isa_name(run.isa);
  j["backend"] = run.backend_name;
  j["kernels"] = run.kernels;
  if (!run.stream_prefetch.empty()) j["weight_stream_prefetch"] = run.stream_prefetch;
  j["repacked_weight_bytes"] = run.repacked_bytes;
  j["prefill_tokens_per_s"] = run.prefill.median;
  j["prefill_ceiling_tokens_per_s"] = number_or_null(prefill_ceiling);
  j["prefill_pct_of_ceiling"] = number_or_null(pct(run.prefill.median, prefill_ceiling));
  j["decode_tokens_per_s"] = decode.median;
  j["decode_ceiling_tokens_per_s"] = number_or_null(decode_ceiling);
  j["decode_pct_of_ceiling"] = number_or_null(pct(decode.median, decode_ceiling));
  if (!run.rep_probe_gbps.empty()) {
    const std::vector<double> p = rep_pcts(r, run.decode.at(f.contexts.front()).samples, run.rep_probe_gbps, 1);
    j["decode_rep_probe_gb_per_s"] = run.rep_probe_gbps;
    j["decode_rep_pct_of_ceiling"] = p;
    j["decode_pct_of_rep_ceilings"] = median(p);
  }
  j["decode_at_context_tokens_per_s"] = speeds_json(run.decode, [](int64_t, const Speed& s) { return s.median; });
  auto ceiling = [&](int64_t b) { return decode_ceiling_tokens_per_s(r.cost, r.peaks, b); };
  j["batched_decode_tokens_per_s"] = speeds_json(run.batched, [](int64_t, const Speed& s) { return s.median; });
  j["batched_decode_ceiling_tokens_per_s"] =
      speeds_json(run.batched, [&](int64_t b, const Speed&) { return number_or_null(ceiling(b)); });
  j["batched_decode_pct_of_ceiling"] =
      speeds_json(run.batched, [&](int64_t b, const Speed& s) { return number_or_null(pct(s.median, ceiling(b))); });
  j["samples"] = {
      {"prefill_tokens_per_s", run.prefill.samples},
      {"decode_tokens_per_s", decode.samples},
      {"decode_at_context_tokens_per_s", speeds_json(run.decode, [](int64_t, const Speed& s) { return s.samples; })},
      {"batched_decode_tokens_per_s", speeds_json(run.batched, [](int64_t, const Speed& s) { return s.samples; })}};
  if (!run.batched_rep_probe_gbps.empty()) {  // batch > 1 with --probe-each-rep
    Json probes = Json::object(), pcts = Json::object();
    for (const auto& [b, v] : run.batched_rep_probe_gbps) {
      probes[std::to_string(b)] = v;
      pcts[std::to_string(b)] = rep_pcts(r, run.batched.at(b).samples, v, b);
    }
    j["batched_rep_probe_gb_per_s"] = probes;
    j["batched_rep_pct_of_ceiling"] = pcts;
  }
  return j;
}

void print_json(const BenchModelFlags& f, const BenchModelRun& r) {
  Json j;
  j["model"] = {{"path", r.path},
                {"name", r.info.name},
                {"arch", r.info.arch},
                {"type", r.info.type},
                {"params", r.info.params},
                {"weight_bytes", r.info.weight_bytes},
                {"weight_bytes_per_token", r.cost.weight_bytes_per_token()},
                {"matrix_bytes", r.cost.matrix_bytes},
                {"lookup_bytes_per_token", r.cost.lookup_bytes_per_token},
                {"int8_ops_per_token", 2 * r.cost.int8_macs_per_token},
                {"fp32_flops_per_token", 2 * r.cost.float_macs_per_token},
                {"n_layer", r.config.n_layer},
                {"n_embd", r.config.n_embd},
                {"n_vocab", r.config.n_vocab}};
  j["device"] = f.device;
  if (!r.runs.empty() && on_gpu(r.runs.front().backend_name)) j["gpus"] = cuda_devices();
  j["threads"] = f.threads;
  j["reps"] = f.reps;
  j["prompt_tokens"] = f.prompt;
  j["ubatch"] = f.ubatch;
  j["gen_tokens"] = f.gen;
  j["batch_gen_steps"] = f.batch_gen;
  j["decode_context_tokens"] = f.contexts;
  j["bandwidth_gb_per_s"] = number_or_null(r.peaks.bandwidth_gb_per_s);
  j["int8_peak_gops"] = number_or_null(r.peaks.int8_gops);
  j["fp32_peak_gflops"] = number_or_null(r.peaks.fp32_gflops);
  j["probes"] = r.probes;
  j["runs"] = Json::array();
  for (const IsaRun& run : r.runs) j["runs"].push_back(run_json(f, r, run));
  j["compute_type"] = compute_type_name(r.compute_type);
  j["kv_type"] = f.kv_type;
  if (r.accuracy)
    j["accuracy_vs_fp32"] = {{"positions", r.accuracy->positions}, {"mean_kl", r.accuracy->mean_kl},
                             {"max_kl", r.accuracy->max_kl}, {"top1_agreement", r.accuracy->top1_agreement}};
  j["joules_per_token"] = nullptr;
  j["energy"] = r.energy;
  std::printf("%s\n", j.dump(2).c_str());
}

std::string join_numbers(const std::vector<double>& v, const char* fmt) {
  std::string s;
  char buf[64];
  for (double x : v) {
    std::snprintf(buf, sizeof buf, fmt, x);
    if (!s.empty()) s += ' ';
    s += buf;
  }
  return s;
}

std::string or_dash(double v, const char* fmt) {
  if (!(v > 0)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// --probe-each-rep's lines under a decode row: the median of its reps' % (rep_pcts), and each
// rep's probe and %.
void print_rep_pcts(const std::vector<double>& probes, const std::vector<double>& p) {
  std::printf("%-28s %12s %12s %8.1f\n", "  vs a probe before each rep", "", "", median(p));
  std::printf("  (probes %s GB/s; reps %s%%)\n", join_numbers(probes, "%.1f").c_str(), join_numbers(p, "%.1f").c_str());
}

void print_table(const BenchModelFlags& f, const BenchModelRun& r) {
  const double prefill_ceiling = compute_ceiling_tokens_per_s(r.cost, r.peaks);
  const double decode_ceiling = decode_ceiling_tokens_per_s(r.cost, r.peaks, 1);
  std::printf("model    %s (%s, %s): %.3g B params, %.3g GB of weights; per token %.3g GB read, %.3g GOP\n",
              r.info.name.c_str(), r.info.arch.c_str(), r.info.type.c_str(), static_cast<double>(r.info.params) / 1e9,
              static_cast<double>(r.info.weight_bytes) / 1e9, static_cast<double>(r.cost.weight_bytes_per_token()) / 1e9,
              2.0 * static_cast<double>(r.cost.macs_per_token()) / 1e9);
  if (!r.runs.empty() && on_gpu(r.runs.front().backend_name))
    std::printf("machine  GPU %s: bandwidth %s GB/s (a kernel reading --probe-mib once)\n",
                cuda_devices().front().c_str(), or_dash(r.peaks.bandwidth_gb_per_s, "%.1f").c_str());
  else
    std::printf("machine  %d threads: bandwidth %s GB/s, int8 %s GOPS, fp32 %s GFLOP/s (probes at %s)\n", f.threads,
                or_dash(r.peaks.bandwidth_gb_per_s, "%.1f").c_str(), or_dash(r.peaks.int8_gops, "%.0f").c_str(),
                or_dash(r.peaks.fp32_gflops, "%.0f").c_str(), std::string(cpu::isa_name(cpu::best_isa())).c_str());
  std::printf("compute type %s, KV cache %s; medians of %d reps; decode ceilings count weight bytes only\n",
              std::string(compute_type_name(r.compute_type)).c_str(), f.kv_type.c_str(), f.reps);
  if (r.accuracy)
    std::printf("accuracy vs fp32 over %lld positions: mean KL %.3g nats (max %.3g), top-1 agreement %.1f%%\n",
                static_cast<long long>(r.accuracy->positions), r.accuracy->mean_kl, r.accuracy->max_kl,
                100 * r.accuracy->top1_agreement);
  std::printf("energy   %s\n", r.energy.c_str());
  auto row = [&](const std::string& test, double v, double ceiling) {
    std::printf("%-28s %12.2f %12s %8s\n", test.c_str(), v, or_dash(ceiling, "%.2f").c_str(),
                or_dash(pct(v, ceiling), "%.1f").c_str());
  };
  for (const IsaRun& run : r.runs) {
    std::printf("\nisa %s, backend %s; kernels:", std::string(cpu::isa_name(run.isa)).c_str(), run.backend_name.c_str());
    for (const auto& [type, k] : run.kernels) std::printf(" [%s]", k.c_str());
    if (!run.stream_prefetch.empty()) std::printf("; weight stream prefetch %s", run.stream_prefetch.c_str());
    std::printf("\n%-28s %12s %12s %8s\n", "test", "tokens/s", "ceiling", "%");
    row("prefill " + std::to_string(f.prompt) + " (ubatch " + std::to_string(f.ubatch) + ")", run.prefill.median,
        prefill_ceiling);
    for (int64_t ctx : f.contexts) {
      row("decode " + std::to_string(f.gen) + " @ " + std::to_string(ctx) + " (batch 1)", run.decode.at(ctx).median,
          decode_ceiling);
      if (ctx == f.contexts.front() && !run.rep_probe_gbps.empty())  // --probe-each-rep
        print_rep_pcts(run.rep_probe_gbps, rep_pcts(r, run.decode.at(ctx).samples, run.rep_probe_gbps, 1));
    }
    for (const auto& [b, s] : run.batched) {
      if (b == 1) continue;
      row("decode batch " + std::to_string(b) + " x " + std::to_string(f.batch_gen), s.median,
          decode_ceiling_tokens_per_s(r.cost, r.peaks, b));
      if (const auto it = run.batched_rep_probe_gbps.find(b); it != run.batched_rep_probe_gbps.end())
        print_rep_pcts(it->second, rep_pcts(r, s.samples, it->second, b));
    }
  }
}

// Every test at one ISA: prefill, batch-1 decode at each context, batched decode.
Result<IsaRun> run_isa(const BenchModelFlags& f, LlamaModel& m, Backend& backend, const std::vector<MatrixRead>& reads,
                       cpu::Isa isa, ComputeType type) {
  IsaRun run;
  run.isa = isa;
  run.backend_name = std::string(backend.name());
  run.repacked_bytes = backend.prepared_weight_bytes();
  const bool gpu = on_gpu(run.backend_name);
  if (!gpu && isa != cpu::Isa::Generic)  // the generic kernels do not prefetch
    run.stream_prefetch = std::string(cpu::stream_prefetch_name(cpu::stream_prefetch()));
  for (const MatrixRead& mr : reads) {
    if (mr.lookup) continue;
    std::string& k = run.kernels[std::string(dtype_name(mr.type))];
    if (gpu) {
      k = std::string(dtype_name(mr.type)) + ": cuda gemv (<= 8 tokens" + (mr.type == DType::F32 ? ", f32: all" : "") +
          "), tensor cores beyond";
      continue;
    }
    k = cpu::describe_matmul_kernel(mr.type, isa);
    const cpu::MatmulKernel* mk = cpu::select_matmul_kernel(mr.type, isa);
    if (run.repacked_bytes > 0 && mk && mk->pack_rows) k += " (packed weights)";
  }
  progress("isa %s, backend %s", std::string(cpu::isa_name(isa)).c_str(), run.backend_name.c_str());
  // One untimed token first: the weights' pages come in from the file here, not in a timed run.
  const DType kv = kv_type_of(f);
  TH_RETURN_IF_ERROR(time_decode(m, backend, 1, 1, 1, f.seed, type, kv).status());

  // --probe-each-rep: the bandwidth probe's best just before a rep, onto its run's list.
  auto probe_before_rep = [&](std::vector<double>& probes) -> Status {
    TH_ASSIGN_OR_RETURN(cpu::BandwidthResult bw, probe_bandwidth(f, gpu));
    probes.push_back(bw.read_gb_per_s.best);
    progress("bandwidth probe before the rep: %.1f GB/s", bw.read_gb_per_s.best);
    return ok_status();
  };
  progress("prefill: %lld tokens in chunks of %lld", static_cast<long long>(f.prompt), static_cast<long long>(f.ubatch));
  TH_ASSIGN_OR_RETURN(run.prefill, repeat(f.reps, static_cast<double>(f.prompt), "prefill", [&] {
                        return time_prefill(m, backend, f.prompt, f.ubatch, f.seed, type, kv);
                      }));
  for (int64_t ctx : f.contexts) {
    progress("decode: %lld tokens, batch 1, after %lld", static_cast<long long>(f.gen), static_cast<long long>(ctx));
    const bool each = f.probe_each_rep && ctx == f.contexts.front();
    TH_ASSIGN_OR_RETURN(run.decode[ctx], repeat(f.reps, static_cast<double>(f.gen), "decode", [&]() -> Result<double> {
                          if (each) TH_RETURN_IF_ERROR(probe_before_rep(run.rep_probe_gbps));
                          return time_decode(m, backend, 1, ctx, f.gen, f.seed, type, kv);
                        }));
  }
  const int64_t ctx = f.contexts.front();
  for (int64_t b : f.batches) {
    if (b == 1) {  // batch 1 is the decode measurement itself
      run.batched[b] = run.decode[ctx];
      continue;
    }
    progress("batched decode: %lld sequences x %lld steps", static_cast<long long>(b), static_cast<long long>(f.batch_gen));
    const std::string what = "batch " + std::to_string(b);
    TH_ASSIGN_OR_RETURN(run.batched[b], repeat(f.reps, static_cast<double>(b * f.batch_gen), what.c_str(),
                                               [&]() -> Result<double> {
                                                 if (f.probe_each_rep)
                                                   TH_RETURN_IF_ERROR(probe_before_rep(run.batched_rep_probe_gbps[b]));
                                                 return time_decode(m, backend, b, ctx, f.batch_gen, f.seed, type, kv);
                                               }));
  }
  return run;
}

int run_bench_model(const BenchModelFlags& f) {
  Result<std::string> path = resolve_model_path(f.model);
  if (!path.ok()) return fail("bench model", path.message());
  Result<GgufFile> file = open_model(*path, "");  // a GGUF or an HF folder
  if (!file.ok()) return fail("bench model", file.message());
  BenchModelRun r;
  std::vector<MatrixRead> reads;
  for (cpu::Isa isa : f.isas) {
    Result<std::unique_ptr<Backend>> made = make_bench_backend(f, isa);
    if (!made.ok()) return fail("bench model", made.message());
    std::unique_ptr<Backend> backend = std::move(made).value();
    const bool gpu = on_gpu(backend->name());
    Result<std::unique_ptr<LlamaModel>> model = LlamaModel::load(*file, *backend);
    if (!model.ok()) return fail("bench model", model.message());
    if (r.runs.empty()) {  // the file is checked now (load): what it costs, and the machine's limits
      const ModelConfig& c = (*model)->config();
      Result<std::vector<MatrixRead>> rd = llama_matrix_reads(*file, c);
      if (!rd.ok()) return fail("bench model", rd.message());
      reads = std::move(*rd);
      r.path = *path;
      r.compute_type = parse_compute_type(f.compute_type).value_or(ComputeType::Native);
      r.cost = forward_cost(reads_for(reads, r.compute_type));
      r.energy = energy_note();
      r.info = model_info(*file, c, reads);
      r.config = c;
      Result<MachinePeaks> peaks = measure_peaks(f, cpu::best_isa(), gpu, r.probes);  // while nothing else of ours runs
      if (!peaks.ok()) return fail("bench model", peaks.message());
      r.peaks = *peaks;
    }
    if (Status s = load_compute_types(**model, {r.compute_type}, "bench model", false); !s.ok()) return fail("bench model", s.message());
    if (r.runs.empty() && r.compute_type != ComputeType::Native && r.compute_type != ComputeType::Fp32 &&
        f.accuracy_tokens > 0) {
      progress("accuracy: %s vs fp32 over %lld tokens of fp32's greedy text", std::string(f.compute_type).c_str(),
               static_cast<long long>(f.accuracy_tokens));
      Result<ComputeAccuracy> a = accuracy_vs_fp32(**model, *backend, *file, r.compute_type, f.accuracy_tokens);
      if (!a.ok()) return fail("bench model", a.message());
      r.accuracy = *a;
    }
    Result<IsaRun> run = run_isa(f, **model, *backend, reads_for(reads, r.compute_type), isa, r.compute_type);
    if (!run.ok()) return fail("bench model", run.message());
    r.runs.push_back(std::move(*run));
    if (gpu) break;  // --isa names the CPU's kernels
  }
  if (f.json) {
    print_json(f, r);
  } else {
    print_table(f, r);
  }
  return 0;
}

}  // namespace

BenchSubcommand add_bench_model(CLI::App& bench) {
  auto f = std::make_shared<BenchModelFlags>();
  CLI::App* app = bench.add_subcommand(
      "model", "Prefill and decode tokens/s of a model, and each as a % of the machine's ceiling.");
  app->add_option("-m,--model", f->model, "GGUF model or Hugging Face folder (default: $TOKENHIVE_MODEL, else models/default.gguf)");
  app->add_option("-t,--threads", f->threads, "threads (probes and backend)")->check(CLI::Range(1, 1024));
  // A string parsed here rather than CLI11's delimiter, which silently drops empty items ("1,,8").
  app->add_option("--batch", f->batch_list, "batched-decode sizes, comma-separated (1 is the decode run)")
      ->check(list_validator([](const std::string& v) { return parse_batch_list(v).status(); }));
  // Bounds that keep the KV cache and the activations (ubatch x vocab logits) within reason.
  app->add_option("--prompt", f->prompt, "prefill prompt tokens")->check(CLI::Range(int64_t{1}, int64_t{65536}));
  app->add_option("--ubatch", f->ubatch, "prefill tokens per forward pass")->check(CLI::Range(int64_t{1}, int64_t{8192}));
  app->add_option("--gen", f->gen, "batch-1 decode tokens")->check(CLI::Range(int64_t{1}, int64_t{65536}));
  app->add_option("--batch-gen", f->batch_gen, "decode steps per batched run")->check(CLI::Range(int64_t{1}, int64_t{65536}));
  app->add_option("--context", f->context_list,
                  "batch-1 decode after each of these many prompt tokens, comma-separated (the first is also the "
                  "batched runs' context)")
      ->check(list_validator([](const std::string& v) { return parse_int_list(v, kMaxContext, "context").status(); }));
  app->add_option("--isa", f->isa_list,
                  "best (default: the backend's choice), all (every SIMD ISA this CPU runs), or names: avx2,avx512")
      ->check(list_validator([](const std::string& v) { return parse_isa_list(v).status(); }));
  app->add_option("--reps", f->reps, "repetitions of each test (the median is reported)")->check(CLI::Range(1, 1000));
  app->add_option("--seed", f->seed, "seed of the random token ids");
  app->add_option("--compute-type", f->compute_type,
                  "weights to compute with: native (the file's), or fp32, bf16, fp16, fp8 converted at load (the "
                  "reduced ones also report KL divergence and top-1 agreement against fp32)")
      ->check(CLI::IsMember({"native", "fp32", "bf16", "fp16", "fp8"}))->capture_default_str();
  app->add_option("--accuracy-tokens", f->accuracy_tokens,
                  "tokens of fp32's greedy text the accuracy runs over; 0: no accuracy run (it loads an fp32 copy)")
      ->check(CLI::Range(int64_t{0}, int64_t{4096}))->capture_default_str();
  app->add_option("--kv-type", f->kv_type, "KV cache type (f16 as llama-bench's default; serve's is --kv-dtype)")
      ->check(CLI::IsMember(kv_dtype_names()))->capture_default_str();
  add_device_option(*app, &f->device);
  app->add_flag("--json", f->json, "one JSON object on stdout instead of the table");
  CLI::Option* each = app->add_flag(
      "--probe-each-rep", f->probe_each_rep,
      "also a bandwidth probe just before each decode rep (batch 1: first context; and each batched rep), and "
      "each rep's % of the ceiling at its own probe: the bandwidth of a shared VM moves between minutes");
  app->add_flag("--no-probe", f->no_probe, "do not measure the machine (ceilings only from the flags below)")
      ->excludes(each);
  app->add_option("--bandwidth-gbps", f->bandwidth_gbps, "memory bandwidth in GB/s instead of measuring it")
      ->check(CLI::PositiveNumber);
  app->add_option("--int8-gops", f->int8_gops, "int8 peak in GOPS instead of measuring it")->check(CLI::PositiveNumber);
  app->add_option("--fp32-gflops", f->fp32_gflops, "f32 FMA peak in GFLOP/s instead of measuring it")
      ->check(CLI::PositiveNumber);
  app->add_option("--probe-mib", f->probe_mib, "bandwidth probe: MiB of arrays in all")
      ->check(CLI::Range(int64_t{1}, int64_t{65536}));
  app->add_option("--probe-reps", f->probe_reps, "repetitions of each probe (the best is the peak)")
      ->check(CLI::Range(1, 1000));
  app->add_option("--probe-ms", f->probe_ms, "compute probes: milliseconds per repetition")
      ->check(CLI::Range(0.1, 60000.0));
  return {app, [f] {
            f->batches = *parse_batch_list(f->batch_list);  // the validators have accepted these
            f->contexts = *parse_int_list(f->context_list, kMaxContext, "context");
            f->isas = *parse_isa_list(f->isa_list);
            try {
              return run_bench_model(*f);
            } catch (const std::bad_alloc&) {
              return fail("bench model", "out of memory (try a smaller --prompt, --ubatch, --batch or --probe-mib)");
            }
          }};
}

}  // namespace th::cli
