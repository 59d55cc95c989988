// `tokenhive bench SUBCOMMAND`: one verb, a CLI11 subcommand per thing measured
// (`model`, `engine`, `serve`). Each subcommand adds itself to the verb's app
// and hands back what runs it once the flags are parsed.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace th::cli {

struct BenchSubcommand {
  CLI::App* app = nullptr;    // parsed() says whether the user chose it
  std::function<int()> run;   // the process exit code
};

/// @brief `bench model`: prefill and decode speed of a model against the machine's limits.
BenchSubcommand add_bench_model(CLI::App& bench);
/// @brief `bench engine`: the serving engine's prefix reuse, priorities under overload, concurrent streams.
BenchSubcommand add_bench_engine(CLI::App& bench);
/// @brief `bench serve`: load-tests an OpenAI-compatible server (latencies, throughput, goodput).
BenchSubcommand add_bench_serve(CLI::App& bench);
/// @brief `bench comm`: all-reduce time between MPI ranks (MPI_Allreduce and the ring).
BenchSubcommand add_bench_comm(CLI::App& bench);

}  // namespace th::cli
