// What generate and serve share to run one model across ranks (--tensor-parallel N, under
// mpirun): the communicator, the start-up checks every rank agrees on (so a bad input is a
// clear error on every rank, never a hang), and the per-rank memory line.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "format/gguf.h"
#include "model/llama_model.h"
#include "parallel/communicator.h"

namespace th::cli {

/// How long a start-up step may wait for the slowest rank (loading a large model included).
inline constexpr std::chrono::milliseconds kStartupTimeout{std::chrono::minutes(5)};

/// @brief The communicator for --tensor-parallel n: one process for n = 1, else MPI, whose
/// job (mpirun -np) must have exactly n ranks: in a job of another size every rank prints
/// "tokenhive VERB: ..." and they all exit(1) together.
Result<std::unique_ptr<Communicator>> start_communicator(int n, std::string_view verb);

/// @brief "" with one rank, else " (rank R of N)": what a verb's messages add.
std::string rank_label(const Communicator& comm);

/// @brief Every rank opened the same model (model_fingerprint), agreed: else an error naming
/// the first rank that differs from rank 0, on every rank.
Status check_same_model(Communicator& comm, const GgufFile& file);

/// @brief With more than one rank, this rank's share of the model (loaded with the
/// communicator) to stderr: "<verb>: rank R of N: query heads ..".
void print_shard(const Communicator& comm, const GgufFile& file, const LlamaModel& model, std::string_view verb);

/// @brief open_model's outcome agreed by every rank, then check_same_model.
Status agree_opened(Communicator& comm, const Result<GgufFile>& file);
/// @brief LlamaModel::load's outcome (with the communicator: sharded) agreed by every rank,
/// then print_shard.
Status agree_loaded(Communicator& comm, const GgufFile& file, const Result<std::unique_ptr<LlamaModel>>& model,
                    std::string_view verb);

/// @brief What a rank other than 0 loads: the same flags rank 0 got.
struct FollowerSetup {
  std::string path, key_file;
  int threads = 0;
  int64_t n_ctx = 0;
  std::string compute_types, default_compute_type;  // serve's lists (the default added)
  std::string verb;
};
/// @brief A rank other than 0 under serve: the start-up steps rank 0 takes (agree_opened,
/// agree_loaded, the compute types), then LlamaModel::follow until rank 0 says stop. SIGTERM
/// and SIGINT are ignored (rank 0 drains and then stops the others; a job mpirun ends goes
/// on to SIGKILL). Returns the exit code; a failed collective ends the job (abort).
int run_follower(Communicator& comm, const FollowerSetup& setup);

/// @brief Rank 0's guard: leaving its scope before finished() (an early error return) ends
/// the whole job, since the other ranks may be waiting in a collective rank 0 will not join.
class AbortUnlessFinished {
 public:
  explicit AbortUnlessFinished(Communicator& comm) : comm_(&comm) {}
  ~AbortUnlessFinished();
  AbortUnlessFinished(const AbortUnlessFinished&) = delete;
  AbortUnlessFinished& operator=(const AbortUnlessFinished&) = delete;
  void finished() { finished_ = true; }

 private:
  Communicator* comm_;
  bool finished_ = false;
};

/// @brief This process's resident set now and at its peak (/proc/self/status VmRSS, VmHWM),
/// in bytes; 0 where /proc cannot be read.
struct ResidentMemory {
  size_t now = 0, peak = 0;
  size_t anon = 0, file = 0, shmem = 0;  // now, by kind (RssAnon, RssFile, RssShmem)
};
ResidentMemory resident_memory();
/// @brief "tokenhive <verb>: rank R of N: resident X MiB (...), peak Y MiB" to stderr.
void print_resident(const Communicator& comm, std::string_view verb = "tokenhive generate");

}  // namespace th::cli
