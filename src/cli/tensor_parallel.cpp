#include "cli/tensor_parallel.h"

#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <vector>

#include "backend/backend.h"
#include "cli/compute_types.h"
#include "cli/verbs.h"
#include "model/encrypted_model.h"
#include "parallel/all_reduce_algorithm.h"

namespace th::cli {

Result<std::unique_ptr<Communicator>> start_communicator(int n, std::string_view verb) {
  if (n == 1) return make_local_communicator();
  // Checked before MPI starts, so a bad value is the same error on every rank (same environment).
  if (const char* env = std::getenv("TOKENHIVE_ALLREDUCE"); env && *env) {
    std::optional<AllReduceAlgorithm> a = parse_all_reduce_algorithm(env);
    if (!a) return Status::errorf("TOKENHIVE_ALLREDUCE: '", std::string_view(env).substr(0, 40), "' is not mpi, ring or doubling");
    set_mpi_all_reduce_algorithm(*a);
  }
  TH_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, make_mpi_communicator());
  if (comm->size() != n) {
    // Every rank finds this. The first rank to exit makes mpirun kill the others, so each says
    // it before the barrier and none leaves before all have (returning the error would let a
    // rank print it after a faster one had exited: a loaded CI host lost a line that way).
    fail(verb, cat("--tensor-parallel ", n, " but this MPI job has ", comm->size(), " ranks (run it as mpirun -np ", n,
                   " ...)"));
    std::fflush(stderr);
    (void)comm->barrier(kStartupTimeout);
    std::exit(1);
  }
  // Every rank got this far: from here a rank that fails says so to all of them (agree).
  TH_RETURN_IF_ERROR(comm->barrier(kStartupTimeout));
  return comm;
}

std::string rank_label(const Communicator& comm) {
  if (comm.size() == 1) return "";
  return cat(" (rank ", comm.rank(), " of ", comm.size(), ")");
}

Status check_same_model(Communicator& comm, const GgufFile& file) {
  if (comm.size() == 1) return ok_status();
  const uint64_t mine = model_fingerprint(file);
  std::vector<uint64_t> all(static_cast<size_t>(comm.size()));
  TH_RETURN_IF_ERROR(comm.all_gather(&mine, sizeof mine, all.data()));
  for (int r = 1; r < comm.size(); ++r)
    if (all[static_cast<size_t>(r)] != all[0])
      return Status::errorf("rank ", r, " opened a different model than rank 0 (fingerprint ", std::hex,
                            all[static_cast<size_t>(r)], " vs ", all[0],
                            "): every rank must load the same file");
  return ok_status();
}

void print_shard(const Communicator& comm, const GgufFile& file, const LlamaModel& model, std::string_view verb) {
  if (comm.size() == 1) return;
  Result<ModelConfig> whole = config_from_gguf(file);
  if (!whole.ok()) return;
  const ModelConfig& full = *whole;
  const ModelConfig& c = model.config();
  const int r = comm.rank();
  std::fprintf(stderr,
               "%.*s: rank %d of %d: query heads %lld..%lld of %lld, KV heads %lld..%lld of %lld, FFN columns "
               "%lld..%lld of %lld; %.1f MiB of weight matrices (rank 0's include the output matrix)\n",
               static_cast<int>(verb.size()), verb.data(), r, comm.size(), static_cast<long long>(r * c.n_head),
               static_cast<long long>((r + 1) * c.n_head - 1), static_cast<long long>(full.n_head),
               static_cast<long long>(r * c.n_head_kv), static_cast<long long>((r + 1) * c.n_head_kv - 1),
               static_cast<long long>(full.n_head_kv), static_cast<long long>(r * c.n_ff),
               static_cast<long long>((r + 1) * c.n_ff - 1), static_cast<long long>(full.n_ff),
               static_cast<double>(model.weight_bytes(ComputeType::Native)) / (1 << 20));
}

ResidentMemory resident_memory() {
  ResidentMemory m;
  std::ifstream in("/proc/self/status");
  std::string key;
  size_t kib = 0;
  while (in >> key) {
    if (key == "VmRSS:" && in >> kib) m.now = kib * 1024;
    if (key == "VmHWM:" && in >> kib) m.peak = kib * 1024;
    if (key == "RssAnon:" && in >> kib) m.anon = kib * 1024;
    if (key == "RssFile:" && in >> kib) m.file = kib * 1024;
    if (key == "RssShmem:" && in >> kib) m.shmem = kib * 1024;
  }
  return m;
}

Status agree_opened(Communicator& comm, const Result<GgufFile>& file) {
  TH_RETURN_IF_ERROR(agree(comm, file.status(), kStartupTimeout));
  return check_same_model(comm, *file);
}

Status agree_loaded(Communicator& comm, const GgufFile& file, const Result<std::unique_ptr<LlamaModel>>& model,
                    std::string_view verb) {
  TH_RETURN_IF_ERROR(agree(comm, model.status(), kStartupTimeout));
  print_shard(comm, file, **model, verb);
  return ok_status();
}

int run_follower(Communicator& comm, const FollowerSetup& s) {
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGINT, SIG_IGN);
  auto fail = [&](const Status& st) {
    std::fprintf(stderr, "%s%s: %s\n", s.verb.c_str(), rank_label(comm).c_str(), st.message().c_str());
    if (comm.failed()) comm.abort(1);
    return 1;
  };
  Result<GgufFile> file = open_model(s.path, s.key_file);
  if (Status st = agree_opened(comm, file); !st.ok()) return fail(st);
  CpuBackendOptions options;
  options.n_threads = s.threads;
  std::unique_ptr<Backend> backend = make_cpu_backend(options);
  Result<std::unique_ptr<LlamaModel>> model = LlamaModel::load(*file, *backend, s.n_ctx, &comm);
  if (Status st = agree_loaded(comm, *file, model, s.verb); !st.ok()) return fail(st);
  std::string list_error;
  std::optional<std::vector<ComputeType>> types = parse_compute_type_list(s.compute_types, &list_error);
  if (!types) return fail(Status::error("--compute-types: " + list_error));
  types->push_back(parse_compute_type(s.default_compute_type).value_or(ComputeType::Native));
  if (Status st = agree(comm, load_compute_types(**model, *types, "serve", true), kStartupTimeout); !st.ok())
    return fail(st);
  if (Status st = (*model)->follow(); !st.ok()) {
    fail(st);
    comm.abort(1);
  }
  print_resident(comm, s.verb);
  return 0;
}

AbortUnlessFinished::~AbortUnlessFinished() {
  if (finished_ || comm_->size() == 1) return;
  std::fprintf(stderr, "rank 0 stopped before the end: ending the MPI job\n");
  comm_->abort(1);
}

void print_resident(const Communicator& comm, std::string_view verb) {
  const ResidentMemory m = resident_memory();
  auto mib = [](size_t b) { return static_cast<double>(b) / (1 << 20); };
  std::fprintf(stderr, "%.*s: rank %d of %d: resident %.1f MiB (%.1f anonymous, %.1f of files, %.1f shared), peak %.1f MiB\n",
               static_cast<int>(verb.size()), verb.data(), comm.rank(), comm.size(), mib(m.now), mib(m.anon), mib(m.file),
               mib(m.shmem), mib(m.peak));
}

}  // namespace th::cli
