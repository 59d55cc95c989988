// The collective operations tensor parallelism needs between the processes (ranks) that
// each hold a shard of one model: the all-reduce after the attention output and after the
// FFN down projection, the broadcast of each step's plan from rank 0, an all-gather for
// start-up checks (model hash, per-rank errors) and a barrier with a timeout, so a rank
// that never arrives is an error instead of a hang. One process (size 1) is the default
// and makes every operation a no-op, so the model has one code path. MPI on CPUs is the
// implementation here (mpi_communicator.cpp); NCCL for GPUs would be another.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace th {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string_view name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// data[i] = the sum over ranks of data[i], on every rank.
  virtual Status all_reduce_sum(float* data, size_t n) = 0;
  /// recv (size() * bytes) = every rank's `bytes` of send, in rank order, on every rank.
  virtual Status all_gather(const void* send, size_t bytes, void* recv) = 0;
  /// root's `bytes` of data to every other rank's data. With `idle`, a waiting rank sleeps
  /// between polls (a follower between steps: MPI's blocking calls spin a core).
  virtual Status broadcast(void* data, size_t bytes, int root, bool idle = false) = 0;
  /// Returns when every rank has entered, or an error after `timeout`.
  virtual Status barrier(std::chrono::milliseconds timeout) = 0;
  /// Ends every rank of the job now with `code` (after a rank printed why): what a rank does
  /// when a collective failed and its peers may be waiting in the next one.
  [[noreturn]] virtual void abort(int code) = 0;
  /// Whether a collective failed or timed out: the ranks may now disagree on what comes next,
  /// so the way out is abort(), not an orderly shutdown.
  virtual bool failed() const = 0;
  /// Wall time spent in all_reduce_sum so far (seconds): the step's share that communication
  /// (and waiting for the slowest rank) takes.
  virtual double all_reduce_seconds() const { return 0; }
};

/// @brief One process: rank 0 of 1; every collective leaves its data as it is.
std::unique_ptr<Communicator> make_local_communicator();

/// @brief The MPI communicator over MPI_COMM_WORLD (MPI_Init_thread on the first call,
/// MPI_Finalize at exit). An error when tokenhive was built without MPI (CMake found none),
/// or when MPI cannot start.
Result<std::unique_ptr<Communicator>> make_mpi_communicator();

/// @brief Whether this build has MPI (CMake's TH_MPI).
bool mpi_available();

/// @brief Every rank's status, gathered: ok when every rank's is, else the first failing
/// rank's message prefixed with "rank R: ", the same on every rank. Messages are cut at 480
/// bytes. How the start-up checks make a bad input an error on every rank, not a hang: a
/// barrier with `timeout` first, so a rank that never gets there is an error too. With one
/// rank: `mine` as it is.
Status agree(Communicator& comm, const Status& mine, std::chrono::milliseconds timeout);

}  // namespace th
