// tokenhive bench: the measuring verb; its subcommands live in bench_*.cpp.
#include <vector>

#include "cli/bench.h"
#include "cli/parse_flags.h"
#include "cli/verbs.h"

namespace th::cli {

int run_bench(int argc, char** argv) {
  CLI::App app{"Measure tokenhive against the machine it runs on.", "tokenhive bench"};
  app.require_subcommand(1);
  const std::vector<BenchSubcommand> subs = {add_bench_model(app), add_bench_engine(app), add_bench_serve(app), add_bench_comm(app)};
  if (std::optional<int> rc = parse_flags(app, "bench", argc, argv)) return *rc;
  for (const BenchSubcommand& s : subs)
    if (s.app->parsed()) return s.run();
  return 2;  // unreachable: CLI11 requires one subcommand
}

}  // namespace th::cli
