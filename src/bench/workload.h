// The requests a `bench serve` run sends: seeded and reproducible, each request a pure
// function of (seed, index), so a run bounded by --duration makes as many as it needs and
// two runs with the same flags send the same prompts in the same order.
//   random         lengths uniform in [len*(1-r), len*(1+r)] (vLLM's --random-range-ratio)
//   shared-prefix  one of --num-prefixes prefixes of --prefix-len tokens, then a random suffix
//   jsonl          one {"prompt": ..., "max_tokens": ...} per line of --dataset-path
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/bench_random.h"
#include "bench/serve_bench.h"

namespace th::bench {

/// @brief Weights of the priority classes, in kPriorityNames' order; they sum to 1.
struct PriorityMix {
  double weight[3] = {0, 1, 0};  // all normal
  bool given = false;            // --priority-mix was set (then requests carry `priority`)
};

/// @brief Parses "high=0.1,normal=0.8,low=0.1" (classes left out weigh 0; weights are normalized).
Result<PriorityMix> parse_priority_mix(const std::string& text);

struct WorkloadOptions {
  std::string kind = "random";  // random | shared-prefix | jsonl
  uint64_t seed = 0;
  int64_t input_len = 1024;     // random: the prompt's tokens; shared-prefix: the suffix's
  int64_t output_len = 128;
  double range_ratio = 0.0;     // in [0, 1)
  int64_t prefix_len = 256;     // shared-prefix
  int64_t num_prefixes = 10;    // shared-prefix
  std::string dataset_path;     // jsonl
  bool ignore_eos = true;
  PriorityMix priorities;
};

/// @brief Makes request `index` of a workload. Thread-safe (const).
class Workload {
 public:
  virtual ~Workload() = default;
  /// @brief Request `index` (any index >= 0: jsonl cycles through its lines).
  virtual BenchRequest request(int64_t index) const = 0;
  /// @brief One line for the report: the workload and its parameters.
  virtual std::string describe() const = 0;
};

/// @brief Checks the options (and reads a jsonl file whole) and builds the workload.
Result<std::unique_ptr<Workload>> make_workload(const WorkloadOptions& options);

/// @brief `n` plain English words, each one token for Llama's, Mistral's, GPT's and Qwen's
/// tokenizers when space-separated: text whose token count is close to n for any server.
std::string random_words(BenchRng& rng, int64_t n);

/// @brief vLLM's length range for a target and a ratio: [floor(len*(1-r)), ceil(len*(1+r))], at least `min`.
std::pair<int64_t, int64_t> length_range(int64_t len, double ratio, int64_t min);

}  // namespace th::bench
