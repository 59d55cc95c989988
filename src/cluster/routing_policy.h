// Which cell a request goes to. The router builds a CellView of every cell
// (its heartbeat, whether it may take this request, and the work this router
// has sent it and not seen finish) and asks a RoutingPolicy to pick one. The
// policies are pure functions of that view: no clock, no network, no state,
// so the same view always picks the same cell (on every router, which makes
// prefix affinity work across several routers too).
//
// Policies (make_routing_policy by name):
//   - "load" (LeastLoadPolicy): the eligible cell with the lowest load_score.
//   - "prefix" (PrefixAffinityPolicy): rendezvous hashing of the prompt's
//     leading blocks, so requests that share a prefix reuse one cell's
//     prefix cache; least load when that cell is too busy or the prompt is
//     shorter than one block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cluster/cell_load.h"

namespace th::cluster {

/// @brief One cell as the router sees it now.
struct CellView {
  std::string id;         // its URL
  bool eligible = false;  // alive, not draining, not excluded for this request
  CellLoad load;          // its last heartbeat
  // Work this router has sent the cell and not seen finish: token sums by
  // priority (an int32, lower = more important; -1/0/1 for high/normal/low).
  std::map<int32_t, int64_t> outstanding_tokens;
};

/// @brief What a policy knows of a request.
struct RouteRequest {
  std::vector<uint64_t> prefix_blocks;  // prefix_block_hashes() of the prompt
  int32_t priority = 0;                 // lower = more important
  int64_t cost_tokens = 0;              // estimate: prompt bytes/4 + max tokens
};

struct LoadOptions {
  // What one sequence the cell reports (running or waiting) is taken to
  // cost, in tokens: the cell's report has counts, not tokens.
  int64_t tokens_per_sequence = 256;
  // Below this fraction of free KV blocks a cell is penalized ...
  double kv_low_fraction = 0.10;
  // ... by up to this many tokens (linearly: 0 at kv_low_fraction, all of it
  // when no block is free). A full cell preempts or queues what it gets.
  int64_t kv_full_penalty_tokens = 16384;
};

struct PolicyOptions {
  LoadOptions load;
  // Prefix affinity: the key is the hash of block min(n, affinity_blocks)-1,
  // so requests sharing their first affinity_blocks blocks (512 bytes at the
  // default 64-byte blocks) share a cell.
  size_t affinity_blocks = 8;
  // Prefix affinity gives way to least load when the affinity cell's score
  // exceeds the least-loaded cell's by more than this.
  int64_t max_imbalance_tokens = 2048;
};

/// @brief Load score of `cell` for a request at `priority`, in tokens:
///
///   score = sum of outstanding_tokens[p] for p <= priority
///         + tokens_per_sequence * (load.running + load.waiting)
///         + kv_full_penalty_tokens * max(0, kv_low_fraction - free/total) / kv_low_fraction
///
/// Outstanding work of lower priority (p > priority) is left out: the cell's
/// scheduler runs this request ahead of it (preempting it if need be), so it
/// does not delay this request. The cell's own counts add the work other
/// routers sent (and count this router's work a second time, which affects
/// every cell alike while the routers spread work evenly). The KV term is 0
/// when kv_total_blocks is 0 (not reported) or kv_low_fraction is 0.
double load_score(const CellView& cell, int32_t priority, const LoadOptions& o = {});

/// @brief Picks a cell for a request.
class RoutingPolicy {
 public:
  virtual ~RoutingPolicy() = default;
  /// @brief Index into `cells` of the cell for `r`, or nullopt when none is
  /// eligible (a cell is eligible when `eligible` is set and its load does not
  /// say draining). Deterministic for equal inputs; the chosen cell does not
  /// depend on the cells' order.
  virtual std::optional<size_t> pick(const RouteRequest& r, std::span<const CellView> cells) const = 0;
  /// @brief The name make_routing_policy knows it by.
  virtual std::string_view name() const = 0;
};

/// @brief The eligible cell with the lowest load_score at the request's
/// priority; ties go to the smallest id.
class LeastLoadPolicy final : public RoutingPolicy {
 public:
  explicit LeastLoadPolicy(LoadOptions o = {}) : options_(o) {}
  std::optional<size_t> pick(const RouteRequest& r, std::span<const CellView> cells) const override;
  std::string_view name() const override { return "load"; }

 private:
  LoadOptions options_;
};

/// @brief Rendezvous (highest-random-weight) hashing of the prompt's prefix
/// key over the eligible cells: key = the hash of block
/// min(n, affinity_blocks)-1, each cell's weight = XXH3_64(cell id, seed =
/// key), the highest weight wins. Requests sharing their first
/// affinity_blocks blocks land on one cell, and removing a cell (or it turning
/// ineligible) moves only the keys it had: every other cell's weights are
/// unchanged. Falls back to least load when the affinity cell's load score
/// exceeds the least-loaded one's by more than max_imbalance_tokens, or when
/// the prompt has no full block.
class PrefixAffinityPolicy final : public RoutingPolicy {
 public:
  explicit PrefixAffinityPolicy(PolicyOptions o = {}) : options_(o) {}
  std::optional<size_t> pick(const RouteRequest& r, std::span<const CellView> cells) const override;
  std::string_view name() const override { return "prefix"; }
  /// @brief The cell rendezvous hashing gives `r` (no load fallback); nullopt
  /// when none is eligible or the prompt has no full block.
  std::optional<size_t> affinity_cell(const RouteRequest& r, std::span<const CellView> cells) const;

 private:
  PolicyOptions options_;
};

/// @brief The rendezvous weight of `cell_id` for prefix key `key`.
uint64_t rendezvous_weight(uint64_t key, std::string_view cell_id);

/// @brief "load" (LeastLoadPolicy) or "prefix" (PrefixAffinityPolicy). An
/// error for any other name and for options out of range (affinity_blocks 0,
/// a negative token count, kv_low_fraction outside [0, 1]).
Result<std::unique_ptr<RoutingPolicy>> make_routing_policy(std::string_view name, const PolicyOptions& o = {});

}  // namespace th::cluster
