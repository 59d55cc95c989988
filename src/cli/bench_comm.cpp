// `tokenhive bench comm`, under mpirun: how long the Communicator's all-reduce takes at the
// sizes tensor parallelism sends (n_embd x batch floats: 2048 and 65536 for the 1.1B shape at
// batch 1 and 32), for MPI_Allreduce, our ring and our recursive doubling. Each size and algorithm is first
// checked (every rank's sum exact), then timed in batches of calls; rank 0 prints the table
// (per call: the median, mean and 90th percentile over batches).
// scripts/tp_shaped_link.sh runs it over a shaped veth link between two network namespaces.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/bench.h"
#include "cli/verbs.h"
#include "parallel/all_reduce_algorithm.h"
#include "parallel/communicator.h"

namespace th::cli {

namespace {

struct BenchCommFlags {
  std::vector<int64_t> sizes = {2048, 65536};
  int iters = 200;
  std::string algorithm = "all";
};

// data[i] = rank + 1 + i % 7 on each rank: every sum is a small integer, exact in float.
Status check_sum(Communicator& comm, size_t n) {
  const int N = comm.size();
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(comm.rank() + 1 + static_cast<int>(i % 7));
  TH_RETURN_IF_ERROR(comm.all_reduce_sum(v.data(), n));
  for (size_t i = 0; i < n; ++i) {
    const float want = static_cast<float>(N * (N + 1) / 2 + N * static_cast<int>(i % 7));
    if (v[i] != want) return Status::errorf("element ", i, " of ", n, " summed to ", v[i], ", not ", want);
  }
  return ok_status();
}

// Microseconds per call, in batches of kBatch back-to-back calls (a batch's time / kBatch),
// sorted. Not call by call: with a link delay d the ranks settle d apart, so rank 0's calls
// alternate between about 0 and 2d (mean d); a batch's mean is what a step's sum of
// all-reduces sees, and the median batch drops a preempted one.
constexpr int kBatch = 10;
Result<std::vector<double>> time_calls(Communicator& comm, size_t n, int iters) {
  std::vector<float> v(n, 1.0f);
  std::vector<double> us;
  const int batches = std::max(1, iters / kBatch);
  for (int b = -1 - batches / 10; b < batches; ++b) {  // the first tenth warms up (connections, buffers)
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kBatch; ++i) {
      TH_RETURN_IF_ERROR(comm.all_reduce_sum(v.data(), n));
      std::fill(v.begin(), v.end(), 1.0f);  // no overflow to infinity over many calls
    }
    const double t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    if (b >= 0) us.push_back(t / kBatch);
  }
  std::sort(us.begin(), us.end());
  return us;
}

int run_bench_comm(const BenchCommFlags& f) {
  Result<std::unique_ptr<Communicator>> started = make_mpi_communicator();
  if (!started.ok()) return fail("bench comm", started.message());
  Communicator& comm = **started;
  std::vector<std::pair<std::string, AllReduceAlgorithm>> algorithms;
  if (f.algorithm == "mpi" || f.algorithm == "all") algorithms.emplace_back("MPI_Allreduce", AllReduceAlgorithm::Library);
  if (f.algorithm == "ring" || f.algorithm == "all") algorithms.emplace_back("ring", AllReduceAlgorithm::Ring);
  if (f.algorithm == "doubling" || f.algorithm == "all")
    algorithms.emplace_back("doubling", AllReduceAlgorithm::Doubling);
  if (comm.rank() == 0)
    std::printf("ranks %d\n%-14s %10s %10s %12s %12s %12s\n", comm.size(), "algorithm", "floats", "bytes",
                "median_us", "mean_us", "p90_us");
  for (int64_t size : f.sizes) {
    const size_t n = static_cast<size_t>(size);
    for (const auto& [name, algorithm] : algorithms) {
      set_mpi_all_reduce_algorithm(algorithm);
      if (Status s = check_sum(comm, n); !s.ok()) {
        fail("bench comm", name + ": " + s.message());
        comm.abort(1);  // the others may be in the next call already
      }
      Result<std::vector<double>> us = time_calls(comm, n, f.iters);
      if (!us.ok()) {
        fail("bench comm", us.message());
        comm.abort(1);
      }
      double sum = 0;
      for (double t : *us) sum += t;
      if (comm.rank() == 0)
        std::printf("%-14s %10zu %10zu %12.1f %12.1f %12.1f\n", name.c_str(), n, n * sizeof(float),
                    (*us)[us->size() / 2], sum / static_cast<double>(us->size()), (*us)[us->size() * 9 / 10]);
    }
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

BenchSubcommand add_bench_comm(CLI::App& bench) {
  auto f = std::make_shared<BenchCommFlags>();
  CLI::App* app = bench.add_subcommand(
      "comm", "All-reduce time between MPI ranks (run under mpirun): MPI_Allreduce, a ring, recursive doubling.");
  app->add_option("--sizes", f->sizes, "floats per all-reduce, comma-separated (n_embd x tokens per step)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 28))
      ->capture_default_str();
  app->add_option("--iters", f->iters, "timed calls per size and algorithm (in batches of 10)")->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app->add_option("--algorithm", f->algorithm, "mpi (MPI_Allreduce), ring, doubling (recursive), or all")
      ->check(CLI::IsMember({"mpi", "ring", "doubling", "all"}))
      ->capture_default_str();
  return {app, [f] { return run_bench_comm(*f); }};
}

}  // namespace th::cli
