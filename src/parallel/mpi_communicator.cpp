// The MPI communicator (built when CMake's TH_MPI is on: an MPI library was found). Every call returns MPI's
// error as a Status (MPI_ERRORS_RETURN) instead of aborting inside the library; waits that
// could last (the barrier, a follower's wait for the next step) poll MPI_Test so they can
// time out or sleep.
// The C API only: Open MPI's mpi.h otherwise pulls in its deprecated C++ bindings (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <thread>
#include <vector>

#include "parallel/all_reduce_algorithm.h"
#include "parallel/communicator.h"

namespace th {

namespace {

bool g_failed = false;  // any call failed or timed out (one communicator per process)
AllReduceAlgorithm g_algorithm = AllReduceAlgorithm::Library;  // all_reduce_algorithm.h: why

Status mpi_status(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return ok_status();
  g_failed = true;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status::errorf("MPI ", what, " failed: ", std::string(text, static_cast<size_t>(len)),
                        " (a peer rank may have died)");
}

// MPI counts are ints: larger transfers go in pieces (none of ours is near 2 GiB).
Status check_count(size_t n, const char* what) {
  if (n > static_cast<size_t>(INT_MAX)) return Status::errorf("MPI ", what, ": ", n, " elements exceed MPI's int count");
  return ok_status();
}

// Waits for req; with a deadline, an error past it; with idle, sleeps between polls after
// the first 2 ms (a decode step's gap is shorter, so a busy cell never sleeps).
Status wait(MPI_Request& req, const char* what, std::chrono::steady_clock::time_point deadline, bool idle) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (;;) {
    int done = 0;
    TH_RETURN_IF_ERROR(mpi_status(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what));
    if (done) return ok_status();
    const Clock::time_point now = Clock::now();
    if (now > deadline) {
      g_failed = true;
      return Status::errorf("MPI ", what, ": not every rank arrived within ",
                            std::chrono::duration_cast<std::chrono::seconds>(now - start).count(), " s");
    }
    if (idle && now - start > std::chrono::milliseconds(2)) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(int rank, int size) : rank_(rank), size_(size) {}
  // After a failure a peer may sit in a collective that will never complete: MPI_Finalize
  // would wait for it, MPI_Abort ends the job.
  ~MpiCommunicator() override {
    if (g_failed) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
  }
  std::string_view name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status all_reduce_sum(float* data, size_t n) override {
    TH_RETURN_IF_ERROR(check_count(n, "all-reduce"));
    const double start = MPI_Wtime();
    const bool power_of_two = (size_ & (size_ - 1)) == 0;
    Status s = g_algorithm == AllReduceAlgorithm::Doubling && power_of_two ? doubling_all_reduce(data, n)
               : g_algorithm == AllReduceAlgorithm::Ring
                   ? ring_all_reduce(data, n)
                   : mpi_status(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                                              MPI_COMM_WORLD),
                                "all-reduce");
    reduce_seconds_ += MPI_Wtime() - start;
    return s;
  }
  Status all_gather(const void* send, size_t bytes, void* recv) override {
    TH_RETURN_IF_ERROR(check_count(bytes, "all-gather"));
    return mpi_status(MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE,
                                    MPI_COMM_WORLD),
                      "all-gather");
  }
  Status broadcast(void* data, size_t bytes, int root, bool idle) override {
    TH_RETURN_IF_ERROR(check_count(bytes, "broadcast"));
    // Always the nonblocking form on every rank: MPI does not match a blocking collective
    // with a nonblocking one, and the waiting follower needs the nonblocking one to sleep.
    MPI_Request req;
    TH_RETURN_IF_ERROR(
        mpi_status(MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD, &req), "broadcast"));
    return wait(req, "broadcast", std::chrono::steady_clock::time_point::max(), idle && rank_ != root);
  }
  Status barrier(std::chrono::milliseconds timeout) override {
    MPI_Request req;
    TH_RETURN_IF_ERROR(mpi_status(MPI_Ibarrier(MPI_COMM_WORLD, &req), "barrier"));
    return wait(req, "barrier", std::chrono::steady_clock::now() + timeout, true);
  }
  bool failed() const override { return g_failed; }
  double all_reduce_seconds() const override { return reduce_seconds_; }
  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  // The ring: chunk c is [n*c/N, n*(c+1)/N). Reduce-scatter: at step s rank r sends chunk
  // r-s to its right and adds chunk r-s-1 from its left into its own, so after N-1 steps it
  // holds the whole sum of chunk r+1. All-gather: at step s it passes on chunk r+1-s and
  // receives chunk r-s in place. Every rank ends with the same bits (the sums are copied).
  Status ring_all_reduce(float* data, size_t n) {
    const int N = size_, r = rank_;
    if (N == 1) return ok_status();
    const int right = (r + 1) % N, left = (r + N - 1) % N;
    auto lo = [&](int c) { return n * static_cast<size_t>(c) / static_cast<size_t>(N); };
    auto count = [&](int c) { return static_cast<int>(lo(c + 1) - lo(c)); };
    ring_buffer_.resize(n / static_cast<size_t>(N) + 1);
    constexpr int kTag = 21;
    for (int s = 0; s < N - 1; ++s) {
      const int send = (r - s + N) % N, recv = (r - s - 1 + N) % N;
      TH_RETURN_IF_ERROR(mpi_status(MPI_Sendrecv(data + lo(send), count(send), MPI_FLOAT, right, kTag, ring_buffer_.data(),
                                                 count(recv), MPI_FLOAT, left, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                                    "ring all-reduce"));
      float* into = data + lo(recv);
      for (int i = 0; i < count(recv); ++i) into[i] += ring_buffer_[static_cast<size_t>(i)];
    }
    for (int s = 0; s < N - 1; ++s) {
      const int send = (r + 1 - s + N) % N, recv = (r - s + N) % N;
      TH_RETURN_IF_ERROR(mpi_status(MPI_Sendrecv(data + lo(send), count(send), MPI_FLOAT, right, kTag, data + lo(recv),
                                                 count(recv), MPI_FLOAT, left, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                                    "ring all-reduce"));
    }
    return ok_status();
  }

  // Recursive doubling: at step k, swap the whole buffer with rank r ^ 2^k and add. Both
  // sides add the same two partial sums; a + b == b + a in floating point, and the partners'
  // partial sums at each step are the same sets, so every rank ends with the same bits.
  Status doubling_all_reduce(float* data, size_t n) {
    ring_buffer_.resize(n);
    constexpr int kTag = 22;
    for (int mask = 1; mask < size_; mask <<= 1) {
      const int peer = rank_ ^ mask;
      TH_RETURN_IF_ERROR(mpi_status(MPI_Sendrecv(data, static_cast<int>(n), MPI_FLOAT, peer, kTag, ring_buffer_.data(),
                                                 static_cast<int>(n), MPI_FLOAT, peer, kTag, MPI_COMM_WORLD,
                                                 MPI_STATUS_IGNORE),
                                    "all-reduce (recursive doubling)"));
      // The lower rank's partial sum first on both sides: the same order, the same bits.
      const bool lower = rank_ < peer;
      for (size_t i = 0; i < n; ++i)
        data[i] = lower ? data[i] + ring_buffer_[i] : ring_buffer_[i] + data[i];
    }
    return ok_status();
  }

  int rank_, size_;
  double reduce_seconds_ = 0;
  std::vector<float> ring_buffer_;
};

}  // namespace

bool mpi_available() { return true; }

void set_mpi_all_reduce_algorithm(AllReduceAlgorithm algorithm) { g_algorithm = algorithm; }

Result<std::unique_ptr<Communicator>> make_mpi_communicator() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return Status::error("MPI is already initialized: one MPI communicator per process");
  // SERIALIZED: serve's engine thread makes the calls of a step, the main thread those of
  // start-up and shutdown, never at the same time.
  int provided = 0;
  TH_RETURN_IF_ERROR(mpi_status(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "init"));
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return Status::error("this MPI library does not support MPI_THREAD_SERIALIZED");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<Communicator>(new MpiCommunicator(rank, size));
}

}  // namespace th
