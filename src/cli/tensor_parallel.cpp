#include "cli/tensor_parallel.h"

#include <cstdio>
#include <fstream>
#include <vector>

namespace th::cli {

Result<std::unique_ptr<Communicator>> start_communicator(int n) {
  if (n == 1) return make_local_communicator();
  TH_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, make_mpi_communicator());
  if (comm->size() != n)
    return Status::errorf("--tensor-parallel ", n, " but this MPI job has ", comm->size(), " ranks (run it as mpirun -np ",
                          n, " ...)");
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

Status shard_model(Communicator& comm, LlamaModel& model, std::string_view verb) {
  if (comm.size() == 1) return ok_status();
  const ModelConfig full = model.config();
  TH_RETURN_IF_ERROR(agree(comm, model.shard(comm), kStartupTimeout));
  const ModelConfig& c = model.config();
  const int r = comm.rank();
  std::fprintf(stderr,
               "%.*s: rank %d of %d: query heads %lld..%lld of %lld, KV heads %lld..%lld of %lld, FFN columns "
               "%lld..%lld of %lld; %.1f MiB of weight matrices (the output matrix counted: rank 0 alone reads it)\n",
               static_cast<int>(verb.size()), verb.data(), r, comm.size(), static_cast<long long>(r * c.n_head),
               static_cast<long long>((r + 1) * c.n_head - 1), static_cast<long long>(full.n_head),
               static_cast<long long>(r * c.n_head_kv), static_cast<long long>((r + 1) * c.n_head_kv - 1),
               static_cast<long long>(full.n_head_kv), static_cast<long long>(r * c.n_ff),
               static_cast<long long>((r + 1) * c.n_ff - 1), static_cast<long long>(full.n_ff),
               static_cast<double>(model.weight_bytes(ComputeType::Native)) / (1 << 20));
  return ok_status();
}

ResidentMemory resident_memory() {
  ResidentMemory m;
  std::ifstream in("/proc/self/status");
  std::string key;
  size_t kib = 0;
  while (in >> key) {
    if (key == "VmRSS:" && in >> kib) m.now = kib * 1024;
    if (key == "VmHWM:" && in >> kib) m.peak = kib * 1024;
  }
  return m;
}

void print_resident(const Communicator& comm, std::string_view verb) {
  const ResidentMemory m = resident_memory();
  std::fprintf(stderr, "%.*s: rank %d of %d: resident %.1f MiB, peak %.1f MiB\n", static_cast<int>(verb.size()),
               verb.data(), comm.rank(), comm.size(), static_cast<double>(m.now) / (1 << 20),
               static_cast<double>(m.peak) / (1 << 20));
}

}  // namespace th::cli
