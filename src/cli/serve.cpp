// tokenhive serve: one cell — a model, its engine and the HTTP API — until
// SIGTERM or SIGINT, then a graceful shutdown (exit 0).
//
// Order of life: the HTTP server listens first (GET /health answers at once,
// /ready says 503 while the model loads), then the model loads, the engine
// starts and the API opens. On a signal: /ready goes 503 and new generation
// requests get 503; in-flight ones have --shutdown-timeout seconds to finish;
// what is left is cut (and cancelled in the engine).
#include <CLI/CLI.hpp>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "base/cpu_set.h"
#include "base/sd_notify.h"
#include "base/system_memory.h"
#include "cli/compute_types.h"
#include "cli/device.h"
#include "cli/flag_env.h"
#include "cli/parse_flags.h"
#include "cli/tensor_parallel.h"
#include "cli/verbs.h"
#include "cluster/cell_membership.h"
#include "engine/engine.h"
#include "engine/warmup.h"
#include "kv/kv_dtype.h"
#include "kv/kv_sizing.h"
#include "model/encrypted_model.h"
#include "format/gguf.h"
#include "model/llama_model.h"
#include "model/model_path.h"
#include "server/access_log.h"
#include "server/api_keys.h"
#include "server/api_service.h"
#include "audit/audit_log.h"
#include "audit/ed25519.h"
#include "server/rate_limiter.h"
#include "http/cors.h"
#include "http/http_server.h"
#include "server/serving_metrics.h"
#include "server/web_ui.h"
#include "http/shutdown_signal.h"
#include "tensor/dtype.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace th::cli {

namespace {

struct ServeFlags {
  std::string model;
  std::string served_name;
  http::HttpServerOptions http;
  int threads = 0;
  std::string device = "cpu";
  int64_t max_num_seqs = 0;  // 0: derived from memory (kv/kv_sizing.h, printed at start)
  int64_t max_num_batched_tokens = 512;
  int64_t block_size = 16;
  int64_t kv_cache_mib = 0;  // 0: derived from the memory left (kv/kv_sizing.h)
  int64_t host_kv_mib = 0;
  bool no_prefix_cache = false, no_kv_prefetch = false;
  std::string kv_dtype = "f16";
  std::string compute_types = "native";
  std::string default_compute_type = "native";
  std::string compute_type_steps = "grouped";
  int64_t max_model_len = 0;
  int64_t max_pending = 256;
  int warmup = 8;
  double shutdown_timeout = 30;
  double header_timeout = 10, body_timeout = 30, idle_timeout = 60;
  std::string api_keys;
  std::string access_log = "-";
  std::string key_file;
  std::string audit_log, audit_key, audit_copy;
  uint64_t audit_every = 1000;
  bool pin = false;
  double audit_seconds = 60;
  std::string admin_token;
  std::string join, discovery, advertise;
  std::string cors_origins;
  std::string chat_template;  // a Jinja file, or "chatml"; empty: the model's own
  std::string pooling;        // embeddings: mean | last; empty: the model's metadata, else mean
  int tensor_parallel = 1;
  std::string tpot_slo, ttft_slo;  // ms, or per class "high=..,normal=.."; empty: none
  double batch_window_ms = 0;
};

// Thousands of open connections need thousands of descriptors: raise the soft limit to the
// hard one (as nginx's worker_rlimit_nofile does), quietly keeping the old one on failure.
void raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// The calling thread's CPUs become `cpus`; threads it creates afterwards inherit them.
void set_own_cpus(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

std::chrono::milliseconds ms(double seconds) { return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)); }

void add_serve_flags(CLI::App& app, ServeFlags& f) {
  app.add_option("-m,--model", f.model, "GGUF model or Hugging Face folder (default: $TOKENHIVE_MODEL, else models/default.gguf)");
  app.add_option("--served-model-name", f.served_name, "the model id clients name (default: the file's name without .gguf)");
  app.add_option("--host", f.http.host, "address to listen on")->capture_default_str();
  app.add_option("--port", f.http.port, "port; 0: an ephemeral one (printed)")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--http-threads", f.http.threads, "HTTP event-loop threads")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("-t,--threads", f.threads, "compute threads; 0: one per physical core")->check(CLI::Range(0, 4096));
  add_device_option(app, &f.device);
  app.add_option("--max-num-seqs", f.max_num_seqs,
                 "sequences running at once; 0: KV memory / one sequence's KV x 0.7, at most 256 and "
                 "--max-num-batched-tokens (printed at start)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 16))->capture_default_str();
  app.add_option("--tpot-slo-ms", f.tpot_slo,
                 "time-per-output-token target: MS, or per class (high=40,normal=80,low=200); each step is sized "
                 "by the learned step cost to keep running streams within it (default: none, static steps)");
  app.add_option("--ttft-slo-ms", f.ttft_slo, "time-to-first-token target, same form; counted in /metrics per class");
  app.add_option("--batch-window-ms", f.batch_window_ms,
                 "an idle engine may hold arrivals up to this long (adapted below it to the step's fixed cost) so "
                 "prompts arriving together share a pass; 0: off (measured not to pay: BENCHMARKS.md)")
      ->check(CLI::Range(0.0, 1000.0))->capture_default_str();
  app.add_option("--max-num-batched-tokens", f.max_num_batched_tokens, "tokens per forward pass (prompt chunks + decodes)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))->capture_default_str();
  app.add_option("--block-size", f.block_size, "KV cache block size (positions)")->check(CLI::Range(int64_t{1}, int64_t{4096}))->capture_default_str();
  app.add_option("--warmup", f.warmup,
                 "requests run before /ready says 200 (one 128-token prompt, the rest 16, all at once, "
                 "4 tokens each), so the first client does not pay for first touches; 0: none")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  app.add_option("--kv-cache-mib", f.kv_cache_mib, "memory of the primary KV tier (MiB); 0: enough for --max-num-seqs sequences of --max-model-len positions, at most half of the memory left after loading (printed at start)")->check(CLI::Range(int64_t{0}, int64_t{1} << 30))->capture_default_str();
  app.add_option("--host-kv-mib", f.host_kv_mib,
                 "memory of the host KV tier that preempted sequences swap to and evicted prefix blocks move to (MiB); 0: none")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))->capture_default_str();
  app.add_flag("--no-prefix-cache", f.no_prefix_cache, "compute every prompt in full (no prefix cache in either tier)");
  app.add_flag("--no-kv-prefetch", f.no_kv_prefetch, "swap sequences in only when they run (no copy-thread prefetch)");
  app.add_option("--kv-dtype", f.kv_dtype, "KV cache type")->check(CLI::IsMember(kv_dtype_names()))->capture_default_str();
  app.add_option("--compute-types", f.compute_types,
                 "compute types requests may ask for (comma-separated: fp32, bf16, fp16, fp8, native; native is "
                 "always loaded); " + std::string(kComputeTypeCosts))
      ->capture_default_str();
  app.add_option("--default-compute-type", f.default_compute_type, "what a request's compute_type \"auto\" means")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16", "fp8", "native"}))->capture_default_str();
  app.add_option("--compute-type-steps", f.compute_type_steps,
                 "requests of several compute types: grouped (each step runs every type, one forward pass per "
                 "type) or alternating (each step runs one type, round robin)")
      ->check(CLI::IsMember({"grouped", "alternating"}))->capture_default_str();
  app.add_option("--max-model-len", f.max_model_len, "positions per sequence; 0: the model's context")->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  app.add_option("--max-pending", f.max_pending, "requests in the engine at once; more get 429")->check(CLI::Range(int64_t{1}, int64_t{1} << 20))->capture_default_str();
  app.add_option("--shutdown-timeout", f.shutdown_timeout, "seconds in-flight requests get to finish after SIGTERM")
      ->check(CLI::Range(0.0, 3600.0))->capture_default_str();
  app.add_option("--http-header-timeout", f.header_timeout, "seconds a client has to send a request's headers (else 408)")
      ->check(CLI::Range(0.001, 3600.0))->capture_default_str();
  app.add_option("--http-body-timeout", f.body_timeout, "seconds a client has to send a request's body (else 408)")
      ->check(CLI::Range(0.001, 3600.0))->capture_default_str();
  app.add_option("--http-idle-timeout", f.idle_timeout, "seconds an idle keep-alive connection stays open")
      ->check(CLI::Range(0.001, 86400.0))->capture_default_str();
  app.add_option("--api-keys", f.api_keys,
                 "key file: one 'KEY TENANT [max_priority=high|normal|low|N] [rpm=N] [tpm=N]' per line; "
                 "without it no key is needed");
  app.add_option("--key-file", f.key_file, "key of an encrypted model: a file, env:VAR or cmd:COMMAND");
  app.add_option("--audit-log", f.audit_log, "tamper-evident audit log (one entry per request; `tokenhive audit verify`)");
  app.add_option("--audit-key", f.audit_key, "Ed25519 private key that signs its checkpoints (`tokenhive audit keygen`)");
  app.add_option("--audit-checkpoint-copy", f.audit_copy, "also append each checkpoint here (a place the server does not control)");
  app.add_option("--audit-checkpoint-every", f.audit_every, "a signed checkpoint every N entries (0: not by count)")->capture_default_str();
  app.add_option("--audit-checkpoint-seconds", f.audit_seconds, "... and every S seconds with new entries (0: not by time)")
      ->check(CLI::Range(0.0, 86400.0))->capture_default_str();
  app.add_flag("--pin", f.pin,
               "pin threads: HTTP and the responder on the first allowed CPU, the engine's compute threads one "
               "per remaining CPU (with at least 2 CPUs)");
  app.add_option("--admin-token", f.admin_token,
                 "bearer token POST /admin/drain needs (default: $TOKENHIVE_ADMIN_TOKEN; unset with --api-keys: refused)");
  app.add_option("--join", f.join, "join the router at this URL (it then routes to this cell; leaves on SIGTERM)");
  app.add_option("--discovery", f.discovery, "register this cell on etcd (etcd://host:port) for routers watching there");
  app.add_option("--advertise", f.advertise, "this cell's URL as routers reach it (default http://HOST:PORT)");
  app.add_option("--cors-origins", f.cors_origins,
                 "origins (comma-separated, or '*') whose browser requests get CORS headers and preflight answers; "
                 "default none");
  app.add_option("--chat-template", f.chat_template,
                 "chat template: a Jinja file, or 'chatml'; replaces the model's tokenizer.chat_template");
  app.add_option("--pooling", f.pooling,
                 "embeddings (/v1/embeddings): mean or last over the prompt's final hidden states (default: the "
                 "model's <arch>.pooling_type when it says mean or last, else mean)")
      ->check(CLI::IsMember({"mean", "last"}));
  app.add_option("--tensor-parallel", f.tensor_parallel,
                 "split the model by attention heads across this many ranks of an MPI job (mpirun -np N tokenhive "
                 "serve --tensor-parallel N ...): rank 0 serves HTTP, the others compute their shard of each step")
      ->check(CLI::Range(1, 4096));
  app.add_option("--access-log", f.access_log, "access log (JSON lines): a file, '-' for stderr, '' for none")
      ->capture_default_str();
}

// What serve keeps for the API besides the model: keys and their rate limits, the access
// log and the audit log.
struct ServeLogs {
  std::optional<server::ApiKeyStore> keys;
  server::RateLimiter rate_limiter;
  std::unique_ptr<server::AccessLog> access_log;
  std::unique_ptr<audit::AuditLog> audit;
};

// Opens the key file and the logs the flags name into `logs` and points `api_options` at
// them: 0, or the exit code (the error printed).
int open_logs(const ServeFlags& f, ServeLogs& logs, server::ApiServiceOptions& api_options) {
  if (!f.api_keys.empty()) {
    Result<server::ApiKeyStore> k = server::ApiKeyStore::load(f.api_keys);
    if (!k.ok()) return fail("serve", k.message());
    logs.keys.emplace(std::move(*k));
    api_options.keys = &*logs.keys;
    api_options.rate_limiter = &logs.rate_limiter;
  }
  if (f.access_log == "-") {
    logs.access_log = std::make_unique<server::AccessLog>(stderr);
  } else if (!f.access_log.empty()) {
    Result<std::unique_ptr<server::AccessLog>> a = server::AccessLog::open(f.access_log);
    if (!a.ok()) return fail("serve", a.message());
    logs.access_log = std::move(*a);
  }
  api_options.access_log = logs.access_log.get();
  if (f.audit_log.empty() != f.audit_key.empty()) {
    std::fprintf(stderr, "tokenhive serve: --audit-log and --audit-key go together\n");
    return 2;
  }
  if (f.audit_log.empty()) return 0;
  Result<audit::Ed25519PrivateKey> key = audit::Ed25519PrivateKey::load(f.audit_key);
  if (!key.ok()) return fail("serve", key.message());
  audit::AuditLogOptions ao;
  ao.checkpoint_every_entries = f.audit_every;
  ao.checkpoint_every_seconds = f.audit_seconds;
  ao.checkpoint_copy_path = f.audit_copy;
  Result<std::unique_ptr<audit::AuditLog>> a = audit::AuditLog::open(f.audit_log, std::move(*key), ao);
  if (!a.ok()) return fail("serve", a.message());
  logs.audit = std::move(*a);
  if (logs.audit->recovery().dropped_tail)
    std::fprintf(stderr, "tokenhive serve: audit log: dropped a torn last record (%llu bytes) left by a crash\n",
                 static_cast<unsigned long long>(logs.audit->recovery().dropped_bytes));
  api_options.audit = logs.audit.get();
  return 0;
}

// The engine's configuration: the KV cache's blocks from the flags' MiB and the model's shape.
Result<EngineConfig> engine_config(const ServeFlags& f, const ModelConfig& mc, const Tokenizer& tok) {
  const DType kv_type = kv_dtype_from_name(f.kv_dtype).value_or(DType::F16);  // the flag's check allows no other
  // K and V, every layer, one block.
  const int64_t block_bytes = 2 * mc.n_layer * static_cast<int64_t>(row_bytes(kv_type, mc.kv_dim())) * f.block_size;
  EngineConfig ec;
  ec.kv.block_size = f.block_size;
  ec.kv.type = kv_type;
  const int64_t len = f.max_model_len > 0 ? f.max_model_len : mc.n_ctx_train > 0 ? mc.n_ctx_train : 2048;
  int64_t avail_bytes = 0;
  if (f.kv_cache_mib == 0 || f.max_num_seqs == 0) {
    Result<int64_t> avail = available_memory_bytes();
    if (!avail.ok()) return Status::error(avail.message() + " (give --kv-cache-mib and --max-num-seqs)");
    avail_bytes = *avail;
  }
  ec.max_seqs = f.max_num_seqs;
  if (ec.max_seqs == 0) {
    // 256: past that a CPU step is compute-bound anyway; the token budget bounds it too.
    const SeqSizing seqs = auto_max_seqs(block_bytes / f.block_size, len,
                                         f.kv_cache_mib > 0 ? f.kv_cache_mib << 20 : avail_bytes / 2,
                                         std::min<int64_t>(256, f.max_num_batched_tokens));
    ec.max_seqs = seqs.max_seqs;
    std::fprintf(stderr, "tokenhive serve: %s\n", seqs.why.c_str());
  }
  if (f.kv_cache_mib > 0) {
    ec.kv.primary_blocks = (f.kv_cache_mib << 20) / block_bytes;
  } else {
    const KvSizing kv = auto_kv_blocks(block_bytes, f.block_size, ec.max_seqs, len, avail_bytes);
    ec.kv.primary_blocks = kv.blocks;
    std::fprintf(stderr, "tokenhive serve: %s\n", kv.why.c_str());
  }
  ec.kv.host_blocks = (f.host_kv_mib << 20) / block_bytes;
  ec.kv.prefix_caching = !f.no_prefix_cache;
  ec.kv.prefetch = !f.no_kv_prefetch;
  ec.token_budget = f.max_num_batched_tokens;
  ec.max_model_len = f.max_model_len;
  ec.end_of_generation = end_of_generation_ids(tok);
  if (ec.kv.primary_blocks < 1)
    return Status::error(cat("--kv-cache-mib ", f.kv_cache_mib, " holds no KV block of ", block_bytes, " bytes"));
  TH_ASSIGN_OR_RETURN(ec.slo.tpot, parse_slo_targets(f.tpot_slo, "--tpot-slo-ms"));
  TH_ASSIGN_OR_RETURN(ec.slo.ttft, parse_slo_targets(f.ttft_slo, "--ttft-slo-ms"));
  ec.slo.batch_window_cap = f.batch_window_ms / 1000.0;
  return ec;
}

// --warmup: N requests through the started engine, reported on stderr.
Status run_warmup(int n, Engine& engine, const Tokenizer& tok) {
  if (n <= 0) return ok_status();
  WarmupOptions w;
  w.requests = n;
  w.n_vocab = tok.n_vocab();
  TH_ASSIGN_OR_RETURN(WarmupReport r, warm_up(engine, w));
  std::fprintf(stderr, "tokenhive serve: warm-up: %d requests (%lld prompt tokens, %lld generated) in %.2f s\n", r.requests,
               static_cast<long long>(r.prompt_tokens), static_cast<long long>(r.generated_tokens), r.seconds);
  return ok_status();
}

// The chat template: --chat-template's file (or the built-in "chatml"), else the model's.
Result<ChatTemplate> load_chat_template(const std::string& flag, const GgufFile& file) {
  if (flag.empty()) return chat_template_for(file);
  if (flag == "chatml") return ChatTemplate::parse(ChatTemplate::chatml_source());
  std::ifstream in(flag, std::ios::binary);
  if (!in) return Status::error(cat("--chat-template ", flag, ": cannot open it (a Jinja file, or 'chatml')"));
  std::stringstream text;
  text << in.rdbuf();
  Result<ChatTemplate> t = ChatTemplate::parse(text.str());
  if (!t.ok()) return Status::error(cat("--chat-template ", flag, ": ", t.message()));
  return t;
}

// /v1/embeddings' pooling: the flag, else the model's <arch>.pooling_type when it is mean (1)
// or last (3) (llama.cpp's numbering), else mean.
Pooling embedding_pooling(const std::string& flag, const GgufFile& file) {
  if (!flag.empty()) return flag == "last" ? Pooling::Last : Pooling::Mean;
  Result<std::string> arch = file.get_string("general.architecture");
  if (!arch.ok() || !file.has(*arch + ".pooling_type")) return Pooling::Mean;
  Result<uint64_t> type = file.get_uint(*arch + ".pooling_type");
  return type.ok() && *type == 3 ? Pooling::Last : Pooling::Mean;
}

// --join / --discovery: a router routes to this cell; null without either.
Result<std::unique_ptr<cluster::CellMembership>> join_cluster(const ServeFlags& f, int port) {
  if (f.join.empty() && f.discovery.empty()) return std::unique_ptr<cluster::CellMembership>();
  cluster::CellMembershipOptions mo;
  mo.join = f.join;
  mo.discovery = f.discovery;
  mo.admin_token = f.admin_token;
  mo.advertise = !f.advertise.empty() ? f.advertise
                 : f.http.host == "0.0.0.0" || f.http.host == "::" ? std::string()
                                                                 : cat("http://", f.http.host, ":", port);
  return cluster::CellMembership::start(mo);
}

// The HTTP options from the flags, and the checks across flags; false (said on stderr) when
// they do not go together.
bool settle_flags(ServeFlags& f) {
  f.http.header_timeout = ms(f.header_timeout);
  f.http.body_timeout = ms(f.body_timeout);
  f.http.idle_timeout = ms(f.idle_timeout);
  f.http.cors_origins = http::parse_cors_origins(f.cors_origins);
  raise_fd_limit();
  if (f.max_num_seqs > 0 && f.max_num_batched_tokens < f.max_num_seqs) {
    std::fprintf(stderr, "tokenhive serve: --max-num-batched-tokens (%lld) must be at least --max-num-seqs (%lld)\n",
                 static_cast<long long>(f.max_num_batched_tokens), static_cast<long long>(f.max_num_seqs));
    return false;
  }
  return true;
}

// The line tests and operators wait for, and READY=1 for a Type=notify unit (deploy/systemd/).
void announce_ready(const ServeFlags& f, const std::string& path, int64_t kv_blocks, int64_t max_model_len) {
  std::fprintf(stderr,
               "tokenhive serve: ready: model %s (%s), %lld KV blocks of %lld positions (%s), max %lld sequences of %lld "
               "positions\n",
               f.served_name.c_str(), path.c_str(), static_cast<long long>(kv_blocks),
               static_cast<long long>(f.block_size), f.kv_dtype.c_str(), static_cast<long long>(f.max_num_seqs),
               static_cast<long long>(max_model_len));
  if (Status s = sd_notify("READY=1"); !s.ok()) std::fprintf(stderr, "tokenhive serve: %s\n", s.message().c_str());
}

// What serve loads with the model, kept alive together (the model points into the file).
struct Loaded {
  std::optional<GgufFile> file;
  std::optional<Tokenizer> tok;
  std::optional<ChatTemplate> chat;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<LlamaModel> model;
};

// The model, its tokenizer and chat template, and the compute types the flags name. Under
// --tensor-parallel, rank 0's side of the start-up steps the other ranks take in
// run_follower (tensor_parallel.h): each step's outcome agreed, the model sharded.
Status load_serving(const ServeFlags& f, const std::string& path, const std::vector<int>& compute_cpus,
                    server::ServingMetrics& metrics, Communicator& comm, Loaded& L) {
  Result<GgufFile> file = open_model(path, f.key_file);
  TH_RETURN_IF_ERROR(agree_opened(comm, file));
  L.file.emplace(std::move(*file));
  Result<Tokenizer> tok = Tokenizer::from_gguf(*L.file);
  if (!tok.ok()) return tok.status();
  L.tok.emplace(std::move(*tok));
  Result<ChatTemplate> chat = load_chat_template(f.chat_template, *L.file);
  if (!chat.ok()) return chat.status();
  L.chat.emplace(std::move(*chat));
  if (!compute_cpus.empty()) set_own_cpus(std::vector<int>(compute_cpus.begin() + 1, compute_cpus.end()));
  CpuBackendOptions backend_options;
  backend_options.n_threads = f.threads;
  backend_options.pin = !compute_cpus.empty();
  Result<std::unique_ptr<Backend>> backend = make_device_backend(f.device, backend_options);
  if (!backend.ok()) return backend.status();
  L.backend = std::move(*backend);
  std::fprintf(stderr, "tokenhive serve: computing on the %s backend\n", std::string(L.backend->name()).c_str());
  Result<std::unique_ptr<LlamaModel>> model = LlamaModel::load(*L.file, *L.backend, f.max_model_len, &comm);
  TH_RETURN_IF_ERROR(agree_loaded(comm, *L.file, model, "tokenhive serve"));
  L.model = std::move(*model);
  if (size_t b = L.backend->prepared_weight_bytes(); b > 0)
    std::fprintf(stderr, "tokenhive serve: repacked %.2f GB of weights for the kernels (TOKENHIVE_REPACK=0: off)\n",
                 static_cast<double>(b) / 1e9);
  std::string list_error;
  std::optional<std::vector<ComputeType>> types = parse_compute_type_list(f.compute_types, &list_error);
  if (!types) return Status::error("--compute-types: " + list_error);
  const ComputeType default_type = parse_compute_type(f.default_compute_type).value_or(ComputeType::Native);
  // The default must be loaded; the others that cannot be are skipped (requests for them get
  // a 400 that says why).
  types->push_back(default_type);
  return agree(comm,
               load_compute_types(*L.model, *types, "serve", true,
                                  [&](ComputeType t, size_t bytes) {
                                    metrics.set_weight_bytes(compute_type_name(t), static_cast<double>(bytes));
                                  }),
               kStartupTimeout);
}

// Under --tensor-parallel, after the warm-up (the engine idle: one thread makes MPI calls at
// a time): every rank's memory, printed and in /metrics.
Status report_rank_memory(LlamaModel& model, const Communicator& comm, server::ServingMetrics& metrics) {
  if (comm.size() == 1) return ok_status();
  TH_ASSIGN_OR_RETURN(auto ranks, model.rank_memory());
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::fprintf(stderr, "tokenhive serve: rank %zu of %d: %.1f MiB of weight matrices, resident %.1f MiB\n", r,
                 comm.size(), static_cast<double>(ranks[r].first) / (1 << 20),
                 static_cast<double>(ranks[r].second) / (1 << 20));
    metrics.set_rank_memory(static_cast<int>(r), static_cast<double>(ranks[r].first),
                            static_cast<double>(ranks[r].second));
  }
  return ok_status();
}

}  // namespace

int run_serve(int argc, char** argv) {
  CLI::App app{"Serve a model over HTTP: OpenAI's /v1/completions and /v1/chat/completions, the native "
               "/v1/generate, /v1/models, /health, /ready and /metrics.",
               "tokenhive serve"};
  ServeFlags f;
  add_serve_flags(app, f);
  env_for_every_flag(app);
  if (std::optional<int> rc = parse_flags(app, "serve", argc, argv)) return *rc;
  if (!settle_flags(f)) return 2;

  // Every rank checks the flags the same way, so a refusal here is printed by each.
  if (f.tensor_parallel > 1 && f.host_kv_mib > 0)
    return fail("serve", "--host-kv-mib: the host KV tier is not available with --tensor-parallel (swaps are not mirrored)");
  if (f.tensor_parallel > 1 && f.device != "cpu") return fail("serve", "--tensor-parallel runs on --device cpu only");
  Result<std::string> path = resolve_model_path(f.model);
  if (!path.ok()) return fail("serve", path.message());
  if (f.served_name.empty()) f.served_name = std::filesystem::path(*path).stem().string();

  // Signals first, so that a SIGTERM during the model load is a clean shutdown too.
  Result<http::ShutdownSignal> signal = http::ShutdownSignal::install();
  if (!signal.ok()) return fail("serve", signal.message());
  // MPI after the signals: its threads inherit the blocked SIGTERM, so only the signalfd sees it.
  Result<std::unique_ptr<Communicator>> started = start_communicator(f.tensor_parallel, "serve");
  if (!started.ok()) return fail("serve", started.message());
  Communicator& comm = **started;
  if (comm.rank() != 0)
    return run_follower(comm, {*path, f.key_file, f.threads, f.max_model_len, f.compute_types, f.default_compute_type,
                               "tokenhive serve"});
  AbortUnlessFinished job(comm);  // rank 0 returning early must not leave the others waiting

  server::ServingMetrics metrics(TH_VERSION);
  server::ApiServiceOptions api_options;
  api_options.metrics = &metrics;
  ServeLogs logs;
  if (int rc = open_logs(f, logs, api_options); rc != 0) return rc;
  if (f.admin_token.empty()) {
    if (const char* t = std::getenv("TOKENHIVE_ADMIN_TOKEN")) f.admin_token = t;
  }
  api_options.admin_token = f.admin_token;
  api_options.model_name = f.served_name;
  api_options.max_pending = f.max_pending;
  // --pin: the HTTP front (event loops, responder) gets a core of its own, so that a
  // saturated engine never delays accepting, parsing or streaming; compute gets the rest.
  const std::vector<int> cpus = allowed_cpus();
  const bool pin = f.pin && cpus.size() >= 2;
  if (f.pin && !pin) std::fprintf(stderr, "tokenhive serve: --pin needs at least 2 CPUs; running unpinned\n");
  if (pin) set_own_cpus({cpus[0]});
  server::ApiService api(api_options);
  http::HttpServer http(f.http);
  api.add_routes(http);
  server::add_web_ui_routes(http);
  if (Status s = http.start(); !s.ok()) return fail("serve", s.message());
  std::fprintf(stderr, "tokenhive serve: listening on http://%s:%d (loading %s)\n", f.http.host.c_str(), http.port(),
               path->c_str());

  Loaded L;
  if (Status st = load_serving(f, *path, pin ? cpus : std::vector<int>(), metrics, comm, L); !st.ok()) return fail("serve", st.message());
  Result<std::unique_ptr<LlamaModel>> model = std::move(L.model);
  std::unique_ptr<Backend>& backend = L.backend;
  const ComputeType default_type = parse_compute_type(f.default_compute_type).value_or(ComputeType::Native);
  Result<EngineConfig> ec = engine_config(f, (*model)->config(), *L.tok);
  if (!ec.ok()) return fail("serve", ec.message());
  f.max_num_seqs = ec->max_seqs;
  ec->default_compute_type = default_type;
  ec->alternate_compute_types = f.compute_type_steps == "alternating";
  if (!(*model)->has_compute_type(default_type))
    return fail("serve", "--default-compute-type " + f.default_compute_type + ": " + (*model)->unavailable_reason(default_type));
  Result<std::unique_ptr<Engine>> engine = Engine::create(**model, *backend, *ec);
  if (!engine.ok()) return fail("serve", engine.message());
  if (Status s = (*engine)->start(); !s.ok()) return fail("serve", s.message());
  if (Status s = run_warmup(f.warmup, **engine, *L.tok); !s.ok()) return fail("serve", s.message());
  if (Status s = report_rank_memory(**model, comm, metrics); !s.ok()) return fail("serve", s.message());
  // Registered before it takes work (routers see a cell that is not ready as draining): a
  // registration that fails (etcd unreachable) ends the process with no request in flight.
  // After attach, that exit stopped the engine under the requests it had, and each of their
  // streams ended as if complete (finish_reason "cancelled", then [DONE]): the soak
  // (scripts/soak.sh) counted such truncated outputs as successes.
  Result<std::unique_ptr<cluster::CellMembership>> membership = join_cluster(f, http.port());
  if (!membership.ok()) return fail("serve", membership.message());
  api.attach(**engine, *L.tok, *L.chat, embedding_pooling(f.pooling, *L.file));
  announce_ready(f, *path, ec->kv.primary_blocks, (*engine)->max_model_len());

  const int sig = signal->wait();
  // Leave first: routers send nothing new, and the streams they have here finish.
  if (*membership) (*membership)->leave();
  std::fprintf(stderr, "tokenhive serve: signal %d: draining (up to %.0f s)\n", sig, f.shutdown_timeout);
  (void)sd_notify("STOPPING=1");
  api.drain();
  // The listener stays open while in-flight work finishes: new requests get 503 (a router
  // retries them on another cell) and heartbeats keep saying "draining" rather than failing,
  // so no router mistakes a draining cell for a dead one and moves its streams.
  const auto deadline = std::chrono::steady_clock::now() + ms(f.shutdown_timeout);
  while (api.in_flight() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool clean = http.shutdown(std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                              deadline - std::chrono::steady_clock::now())));
  api.stop();
  (*engine)->stop();
  if (Status s = (*model)->stop_followers(); !s.ok()) return fail("serve", s.message());
  job.finished();
  if (logs.audit) {
    if (Status s = logs.audit->close(); !s.ok()) std::fprintf(stderr, "tokenhive serve: audit log: %s\n", s.message().c_str());
  }
  std::fprintf(stderr, "tokenhive serve: stopped%s\n", clean ? "" : " (cut requests that outlived the deadline)");
  return 0;
}

}  // namespace th::cli
