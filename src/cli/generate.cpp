// tokenhive generate: text from a model, streamed to stdout (the prompt, then
// what follows it); timing to stderr.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "backend/backend.h"
#include "cli/compute_types.h"
#include "cli/device.h"
#include "cli/parse_flags.h"
#include "cli/tensor_parallel.h"
#include "cli/verbs.h"
#include "engine/generator.h"
#include "model/encrypted_model.h"
#include "format/gguf.h"
#include "model/llama_model.h"
#include "model/model_path.h"
#include "tokenizer/tokenizer.h"

namespace th::cli {

namespace {
// Under --tensor-parallel, once a collective failed: a peer may wait in the next one, so
// the whole job ends here (mpirun reports every rank's exit).
[[noreturn]] void abort_job(Communicator& comm, const std::string& msg) {
  std::fprintf(stderr, "tokenhive generate%s: %s; ending the MPI job\n", rank_label(comm).c_str(), msg.c_str());
  comm.abort(1);
  std::abort();  // not reached: abort() does not return (the call is virtual)
}
}  // namespace

int run_generate(int argc, char** argv) {
  CLI::App app{"Generate text from a model. stdout: the prompt followed by the generated text.",
               "tokenhive generate"};
  std::string model_flag, prompt;
  GenerateOptions opt;
  SamplingParams& sp = opt.sampling;
  int64_t seed = -1;
  int n_threads = 0, tensor_parallel = 1;
  std::string key_file, compute_type = "native", device = "cpu";
  app.add_option("-m,--model", model_flag, "GGUF model or Hugging Face folder (default: $TOKENHIVE_MODEL, else models/default.gguf)");
  app.add_option("-p,--prompt", prompt, "prompt text; '' starts from BOS alone");
  app.add_option("-n,--n-predict", opt.max_tokens, "tokens to generate; -1: until end of text or context")
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 40));
  app.add_option("-c,--ctx-size", opt.n_ctx, "context size; 0: the model's")->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  app.add_option("-b,--batch-size", opt.n_batch, "prompt tokens per forward pass")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--temp", sp.temperature, "temperature; 0: greedy");
  app.add_option("--top-k", sp.top_k, "top-k; 0: off");
  app.add_option("--top-p", sp.top_p, "top-p; 1: off");
  app.add_option("--min-p", sp.min_p, "min-p; 0: off");
  app.add_option("--repeat-penalty", sp.repeat_penalty, "repetition penalty; 1: off");
  app.add_option("--repeat-last-n", sp.repeat_last_n, "tokens the penalties look back over; -1: all");
  app.add_option("--presence-penalty", sp.presence_penalty, "presence penalty");
  app.add_option("--frequency-penalty", sp.frequency_penalty, "frequency penalty");
  app.add_option("-s,--seed", seed, "random seed; -1: a random one (printed)")
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()));
  app.add_option("--key-file", key_file, "key of an encrypted model: a file, env:VAR or cmd:COMMAND");
  app.add_option("--compute-type", compute_type,
                 "the weights to compute with: fp32, bf16, fp16, fp8 (converted once at load), native or auto (the "
                 "file's own)")
      ->check(CLI::IsMember({"auto", "fp32", "bf16", "fp16", "fp8", "native"}))->capture_default_str();
  app.add_flag("--ignore-eos", opt.ignore_eos, "keep generating past end-of-text tokens");
  app.add_option("-t,--threads", n_threads, "compute threads; 0: one per physical core")
      ->check(CLI::Range(0, 4096));
  add_device_option(app, &device);
  app.add_option("--tensor-parallel", tensor_parallel,
                 "split the model by attention heads across this many ranks of an MPI job (mpirun -np N tokenhive "
                 "generate --tensor-parallel N ...); rank 0 prints")
      ->check(CLI::Range(1, 4096));
  if (std::optional<int> rc = parse_flags(app, "generate", argc, argv)) return *rc;
  if (Status s = sp.validate(); !s.ok()) {
    std::fprintf(stderr, "tokenhive generate: %s\n", s.message().c_str());
    return 2;
  }
  sp.seed = seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}();

  if (tensor_parallel > 1 && device != "cpu") return fail("generate", "--tensor-parallel runs on --device cpu only");
  Result<std::unique_ptr<Communicator>> started = start_communicator(tensor_parallel, "generate");
  if (!started.ok()) return fail("generate", started.message());
  Communicator& comm = **started;
  // Each start-up step's outcome is agreed by every rank (agree: one rank's error is every
  // rank's), so no rank goes on into a collective its peers will never join.
  auto step = [&](const Status& mine) { return agree(comm, mine, kStartupTimeout); };
  auto failed = [&](const Status& s) { return comm.failed() ? (abort_job(comm, s.message()), 1) : fail("generate", s.message() + rank_label(comm)); };
  Result<std::string> path = resolve_model_path(model_flag);
  if (Status s = step(path.status()); !s.ok()) return failed(s);
  Result<GgufFile> file = open_model(*path, key_file);
  if (Status s = step(file.status()); !s.ok()) return failed(s);
  if (Status s = step(check_same_model(comm, *file)); !s.ok()) return failed(s);
  Result<Tokenizer> tok = Tokenizer::from_gguf(*file);
  if (Status s = step(tok.status()); !s.ok()) return failed(s);
  CpuBackendOptions backend_options;
  backend_options.n_threads = n_threads;
  Result<std::unique_ptr<Backend>> made = make_device_backend(device, backend_options);
  if (!made.ok()) return fail("generate", made.message());
  std::unique_ptr<Backend> backend = std::move(made).value();
  Result<std::unique_ptr<LlamaModel>> model = LlamaModel::load(*file, *backend, opt.n_ctx, &comm);
  if (Status s = agree_loaded(comm, *file, model, "tokenhive generate"); !s.ok()) return failed(s);
  opt.compute_type = parse_compute_type(compute_type).value_or(ComputeType::Native);
  if (opt.compute_type == ComputeType::Auto) opt.compute_type = ComputeType::Native;
  if (Status s = step(load_compute_types(**model, {opt.compute_type}, "generate", false)); !s.ok())
    return failed(Status::error("--compute-type " + compute_type + ": " + s.message()));
  if (comm.rank() != 0) {  // a follower: rank 0's forward passes until it says stop
    Status s = (*model)->follow();
    if (!s.ok()) abort_job(comm, s.message());
    print_resident(comm);
    return 0;
  }

  // BOS, then the prompt as SentencePiece encodes it (with its leading space).
  std::vector<int32_t> ids = tok->encode(prompt, /*add_special=*/true, /*parse_special=*/true);
  if (ids.empty() || ids.front() != tok->bos()) ids.insert(ids.begin(), tok->bos());
  std::fprintf(stderr, "tokenhive generate: %s, %lld prompt tokens, seed %llu, backend %s\n", path->c_str(),
               static_cast<long long>(ids.size()), static_cast<unsigned long long>(sp.seed),
               std::string(backend->name()).c_str());

  Detokenizer detok(*tok);
  for (int32_t id : ids) std::fputs(detok.push(id).c_str(), stdout);
  std::fflush(stdout);
  Generator gen(**model, *backend, end_of_generation_ids(*tok));
  Result<GenerateStats> st = gen.run(ids, opt, [&](int32_t id) {
    std::fputs(detok.push(id).c_str(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::fputs(detok.flush().c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (comm.failed()) abort_job(comm, st.message());
  if (Status s = (*model)->stop_followers(); !s.ok()) abort_job(comm, s.message());
  if (!st.ok()) return fail("generate", st.message());
  if (comm.size() > 1) {
    print_resident(comm);
    std::fprintf(stderr, "tokenhive generate: rank 0: %.3f s in all-reduces of %.3f s of prompt and generation\n",
                 comm.all_reduce_seconds(), st->prompt_seconds + st->generate_seconds);
  }
  auto rate = [](int64_t n, double s) { return s > 0 ? static_cast<double>(n) / s : 0.0; };
  std::fprintf(stderr, "prompt: %lld tokens, %.2f tokens/s\ngeneration: %lld tokens, %.2f tokens/s\n",
               static_cast<long long>(st->n_prompt), rate(st->n_prompt, st->prompt_seconds),
               static_cast<long long>(st->n_generated), rate(st->n_generated, st->generate_seconds));
  return 0;
}

}  // namespace th::cli
