// tokenhive bench engine: the serving engine under load, three scenarios.
//   prefix      a repeated N-token prompt: time to first token, cold then with its prefix cached
//   priority    high-priority requests' time to first token alone, then under a flood of
//               low-priority ones (the lows' too)
//   throughput  aggregate generated tokens/s of S concurrent streams against one stream
// Synthetic models make the numbers meaningful beyond stories260K, e.g.
//   tokenhive mkmodel --shape custom --dim 256 --layers 4 --heads 4 --ffn 768 --type q8_0 -o mid.gguf
//   tokenhive mkmodel --shape 1.1b --type q4_0 -o tinyllama-q4_0.gguf
#include <CLI/CLI.hpp>

#include <memory>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "cli/bench.h"
#include "cli/verbs.h"
#include "engine/engine.h"
#include "format/gguf.h"
#include "kv/kv_dtype.h"
#include "model/encrypted_model.h"
#include "model/llama_model.h"
#include "model/model_path.h"
#include "tensor/dtype.h"

namespace th::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::string model;
  std::string scenario = "all";
  int64_t prompt_tokens = 1000;   // prefix
  int64_t streams = 32;           // throughput
  int64_t gen_tokens = 32;        // throughput: tokens per stream
  int64_t block_size = 16;
  int64_t token_budget = 512;
  std::string kv_type = "f16";  // serve's default
  uint64_t seed = 1;
  int threads = 0;                // 0: one per physical core
};

// The one place the benchmark builds its backend.
std::unique_ptr<Backend> make_bench_backend(const BenchOptions& o) {
  CpuBackendOptions b;
  b.n_threads = o.threads;
  return make_cpu_backend(b);
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<int32_t> random_prompt(std::mt19937_64& rng, int64_t n, int32_t n_vocab) {
  std::vector<int32_t> p = {1};
  std::uniform_int_distribution<int32_t> tok(3, n_vocab - 1);
  while (static_cast<int64_t>(p.size()) < n) p.push_back(tok(rng));
  return p;
}

GenerateRequest request(std::vector<int32_t> prompt, int64_t max_tokens, Priority prio = Priority::Normal) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.set_priority(prio);
  return r;
}

// Steps the engine until `s` has finished; returns its metrics.
Result<RequestMetrics> serve_one(Engine& e, RequestStream& s) {
  while (!s.done()) {
    TH_RETURN_IF_ERROR(e.step());
    s.drain();
  }
  return s.metrics();
}

struct Summary {
  double mean = 0, median = 0, max = 0;
};
Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  s.median = v[v.size() / 2];
  s.max = v.back();
  return s;
}

class Bench {
 public:
  Bench(const BenchOptions& o, LlamaModel& m, Backend& b, DType kv_type) : o_(o), model_(m), backend_(b), kv_type_(kv_type) {}

  Result<std::unique_ptr<Engine>> engine(int64_t primary_blocks, int64_t max_seqs, int64_t budget, int64_t host_blocks = 0,
                                         std::shared_ptr<const Scheduler> policy = nullptr) {
    EngineConfig c;
    c.scheduler = std::move(policy);
    c.kv.block_size = o_.block_size;
    c.kv.primary_blocks = primary_blocks;
    c.kv.host_blocks = host_blocks;
    c.kv.type = kv_type_;
    c.max_seqs = max_seqs;
    c.token_budget = std::max(budget, max_seqs);
    return Engine::create(model_, backend_, std::move(c));
  }

  Status prefix() {
    const int64_t n = o_.prompt_tokens;
    const int64_t blocks = 2 * (n / o_.block_size + 2);
    TH_ASSIGN_OR_RETURN(auto e, engine(blocks, 4, o_.token_budget));
    std::mt19937_64 rng(o_.seed);
    const std::vector<int32_t> prompt = random_prompt(rng, n, model_.config().n_vocab);
    auto run = [&](const std::string& tenant) -> Result<RequestMetrics> {
      GenerateRequest r = request(prompt, 1);
      r.tenant = tenant;
      TH_ASSIGN_OR_RETURN(RequestStream s, e->submit(std::move(r)));
      return serve_one(*e, s);
    };
    TH_ASSIGN_OR_RETURN(RequestMetrics cold, run("a"));
    TH_ASSIGN_OR_RETURN(RequestMetrics warm, run("a"));
    TH_ASSIGN_OR_RETURN(RequestMetrics other, run("b"));
    std::printf("prefix reuse: %lld-token prompt, block %lld, budget %lld tokens/step\n", static_cast<long long>(n),
                static_cast<long long>(o_.block_size), static_cast<long long>(o_.token_budget));
    std::printf("  first          TTFT %9.4f s\n", cold.ttft_seconds);
    std::printf("  second         TTFT %9.4f s  (%lld prompt tokens from the prefix cache)\n", warm.ttft_seconds,
                static_cast<long long>(warm.prefix_hit_tokens));
    std::printf("  other tenant   TTFT %9.4f s  (%lld from the cache: tenants never share)\n", other.ttft_seconds,
                static_cast<long long>(other.prefix_hit_tokens));
    std::printf("  speedup        %.1fx\n", cold.ttft_seconds / warm.ttft_seconds);
    return ok_status();
  }

  Status priority() {
    // Slots, not blocks, are what runs out: 8 sequences at a time, each with room to finish.
    constexpr int64_t kMaxSeqs = 8, kPrompt = 64, kLowGen = 32, kLows = 32, kHighs = 8;
    const int64_t budget = kPrompt + kMaxSeqs;  // a high prompt and every decode fit one step
    const int64_t blocks = kMaxSeqs * ((kPrompt + kLowGen) / o_.block_size + 2);
    const int32_t nv = model_.config().n_vocab;
    std::mt19937_64 rng(o_.seed);

    std::vector<double> alone;
    {
      TH_ASSIGN_OR_RETURN(auto e, engine(blocks, kMaxSeqs, budget));
      for (int i = 0; i < 5; ++i) {
        TH_ASSIGN_OR_RETURN(RequestStream s, e->submit(request(random_prompt(rng, kPrompt, nv), 2, Priority::High)));
        TH_ASSIGN_OR_RETURN(RequestMetrics m, serve_one(*e, s));
        alone.push_back(m.ttft_seconds);
      }
    }
    const Summary idle = summarize(alone);
    std::printf("priority: %lld low-priority requests (%lld-token prompts, %lld tokens each) flood %lld slots;\n"
                "          %lld high-priority %lld-token prompts arrive meanwhile (budget %lld tokens/step)\n",
                static_cast<long long>(kLows), static_cast<long long>(kPrompt), static_cast<long long>(kLowGen),
                static_cast<long long>(kMaxSeqs), static_cast<long long>(kHighs), static_cast<long long>(kPrompt),
                static_cast<long long>(budget));
    std::printf("  high, engine idle        TTFT mean %8.4f s  median %8.4f s  max %8.4f s\n", idle.mean, idle.median,
                idle.max);

    auto loaded = [&](std::shared_ptr<const Scheduler> policy, const char* label) -> Status {
      TH_ASSIGN_OR_RETURN(auto e, engine(blocks, kMaxSeqs, budget, 0, std::move(policy)));
      TH_RETURN_IF_ERROR(e->start());
      std::vector<RequestStream> lows, highs;
      for (int64_t i = 0; i < kLows; ++i) {
        TH_ASSIGN_OR_RETURN(RequestStream s, e->submit(request(random_prompt(rng, kPrompt, nv), kLowGen, Priority::Low)));
        lows.push_back(std::move(s));
      }
      // Highs arrive at odd moments while the lows keep every slot busy.
      std::uniform_real_distribution<double> gap(1.5, 4.0);
      int64_t waiting_lows = 0;
      for (int64_t i = 0; i < kHighs; ++i) {
        std::this_thread::sleep_for(std::chrono::duration<double>(gap(rng) * idle.median));
        waiting_lows = std::min<int64_t>(i == 0 ? kLows : waiting_lows, e->stats().waiting);
        TH_ASSIGN_OR_RETURN(RequestStream s, e->submit(request(random_prompt(rng, kPrompt, nv), 2, Priority::High)));
        highs.push_back(std::move(s));
      }
      std::vector<double> high_ttft, low_ttft;
      for (auto* group : {&highs, &lows}) {
        for (RequestStream& s : *group) {
          while (s.next()) {
          }
          (group == &highs ? high_ttft : low_ttft).push_back(s.metrics().ttft_seconds);
        }
      }
      e->stop();
      const Summary h = summarize(high_ttft), l = summarize(low_ttft);
      const EngineStats st = e->stats();
      std::printf("  %s\n", label);
      std::printf("    high, under load       TTFT mean %8.4f s  median %8.4f s  max %8.4f s  = %.2fx / %.2fx / %.2fx idle median\n",
                  h.mean, h.median, h.max, h.mean / idle.median, h.median / idle.median, h.max / idle.median);
      std::printf("    low,  under load       TTFT mean %8.4f s  median %8.4f s  max %8.4f s\n", l.mean, l.median, l.max);
      std::printf("    >= %lld lows waiting whenever a high arrived; %lld preemptions (recompute)\n",
                  static_cast<long long>(waiting_lows), static_cast<long long>(st.preempted_recompute));
      return ok_status();
    };
    TH_RETURN_IF_ERROR(loaded(std::make_shared<PriorityScheduler>(), "default priority policy"));
    TH_RETURN_IF_ERROR(loaded(std::make_shared<PriorityScheduler>(60.0, 16),
                              "low-priority prompt chunks capped at 16 tokens/step"));
    return ok_status();
  }

  Status throughput() {
    constexpr int64_t kPrompt = 16;
    const int64_t per_seq = (kPrompt + o_.gen_tokens) / o_.block_size + 2;
    struct Rates {
      double end_to_end = 0;  // generated tokens / wall time from submission (prefill included)
      double decode = 0;      // generated tokens / wall time once every stream had its first token
    };
    auto measure = [&](int64_t streams) -> Result<Rates> {
      TH_ASSIGN_OR_RETURN(auto e, engine(streams * per_seq, streams, std::max<int64_t>(o_.token_budget, streams)));
      std::mt19937_64 rng(o_.seed);
      std::vector<RequestStream> ss;
      const Clock::time_point t0 = Clock::now();
      for (int64_t i = 0; i < streams; ++i) {
        TH_ASSIGN_OR_RETURN(RequestStream s,
                            e->submit(request(random_prompt(rng, kPrompt, model_.config().n_vocab), o_.gen_tokens)));
        ss.push_back(std::move(s));
      }
      std::vector<uint8_t> started(ss.size(), 0);
      int64_t n_started = 0, g1 = 0;
      Clock::time_point t1 = t0;
      while (e->has_work()) {
        TH_RETURN_IF_ERROR(e->step());
        for (size_t i = 0; i < ss.size(); ++i)
          if (!ss[i].drain().empty() && !started[i]) {
            started[i] = 1;
            ++n_started;
          }
        if (n_started == streams && g1 == 0) {
          t1 = Clock::now();
          g1 = e->stats().tokens_generated;
        }
      }
      const int64_t g2 = e->stats().tokens_generated;
      Rates r;
      r.end_to_end = static_cast<double>(g2) / since(t0);
      r.decode = g2 > g1 ? static_cast<double>(g2 - g1) / since(t1) : 0.0;
      return r;
    };
    TH_ASSIGN_OR_RETURN(Rates one, measure(1));
    TH_ASSIGN_OR_RETURN(Rates many, measure(o_.streams));
    std::printf("throughput: %lld-token prompts, %lld generated tokens per stream, backend %.*s\n",
                static_cast<long long>(kPrompt), static_cast<long long>(o_.gen_tokens),
                static_cast<int>(backend_.name().size()), backend_.name().data());
    std::printf("  %-10s %12s %14s\n", "streams", "decode t/s", "end-to-end t/s");
    std::printf("  %-10d %12.2f %14.2f\n", 1, one.decode, one.end_to_end);
    std::printf("  %-10lld %12.2f %14.2f\n", static_cast<long long>(o_.streams), many.decode, many.end_to_end);
    std::printf("  aggregate vs one stream: %.2fx decoding, %.2fx end to end\n", many.decode / one.decode,
                many.end_to_end / one.end_to_end);
    return ok_status();
  }

 private:
  const BenchOptions& o_;
  LlamaModel& model_;
  Backend& backend_;
  DType kv_type_;
};

int run_bench_engine(const BenchOptions& o) {
  const DType kv_type = kv_dtype_from_name(o.kv_type).value_or(DType::F16);  // the flag's check allows no other
  Result<std::string> path = resolve_model_path(o.model);
  if (!path.ok()) return fail("bench engine", path.message());
  Result<GgufFile> file = open_model(*path, "");  // a GGUF, an encrypted one (refused without a key) or an HF folder
  if (!file.ok()) return fail("bench engine", file.message());
  std::unique_ptr<Backend> backend = make_bench_backend(o);
  Result<std::unique_ptr<LlamaModel>> model = LlamaModel::load(*file, *backend);
  if (!model.ok()) return fail("bench engine", model.message());
  const ModelConfig& c = (*model)->config();
  std::printf("model %s: %lld layers, dim %lld, vocab %lld; KV %s\n", path->c_str(), static_cast<long long>(c.n_layer),
              static_cast<long long>(c.n_embd), static_cast<long long>(c.n_vocab), o.kv_type.c_str());

  Bench bench(o, **model, *backend, kv_type);
  for (const char* s : {"prefix", "priority", "throughput"}) {
    if (o.scenario != "all" && o.scenario != s) continue;
    const std::string name = s;
    Status st = name == "prefix" ? bench.prefix() : name == "priority" ? bench.priority() : bench.throughput();
    if (!st.ok()) return fail("bench engine", st.message());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

BenchSubcommand add_bench_engine(CLI::App& bench) {
  auto f = std::make_shared<BenchOptions>();
  BenchOptions& o = *f;
  CLI::App* app = bench.add_subcommand(
      "engine", "The serving engine: prefix reuse, priorities under overload, concurrent streams.");
  app->add_option("-m,--model", o.model, "GGUF model or Hugging Face folder (default: $TOKENHIVE_MODEL, else models/default.gguf)");
  app->add_option("--scenario", o.scenario, "prefix | priority | throughput | all")
      ->check(CLI::IsMember({"prefix", "priority", "throughput", "all"}));
  app->add_option("--prompt-tokens", o.prompt_tokens, "prefix: the repeated prompt's length")->check(CLI::Range(2, 1 << 20));
  app->add_option("--streams", o.streams, "throughput: concurrent streams")->check(CLI::Range(1, 4096));
  app->add_option("--gen-tokens", o.gen_tokens, "throughput: tokens each stream generates")->check(CLI::Range(1, 1 << 20));
  app->add_option("--block-size", o.block_size, "KV block size (positions)")->check(CLI::Range(1, 4096));
  app->add_option("--budget", o.token_budget, "tokens per forward pass (prefix, throughput)")->check(CLI::Range(1, 1 << 20));
  app->add_option("--kv-type", o.kv_type, "KV cache type (f16, as serve's --kv-dtype)")->check(CLI::IsMember(kv_dtype_names()))->capture_default_str();
  app->add_option("--seed", o.seed, "prompts' random seed");
  app->add_option("-t,--threads", o.threads, "compute threads; 0: one per physical core")->check(CLI::Range(0, 1024));
  return {app, [f] { return run_bench_engine(*f); }};
}

}  // namespace th::cli
