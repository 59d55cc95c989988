#include "cluster/routing_policy.h"

#include <xxhash.h>

#include <algorithm>

namespace th::cluster {

namespace {

bool takes_work(const CellView& c) { return c.eligible && !c.load.draining; }

// The least-loaded eligible cell: lowest score, then smallest id, then
// lowest index (only equal ids are left to the order).
std::optional<size_t> least_loaded(const RouteRequest& r, std::span<const CellView> cells, const LoadOptions& o,
                                   double* score_out) {
  std::optional<size_t> best;
  double best_score = 0;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (!takes_work(cells[i])) continue;
    const double s = load_score(cells[i], r.priority, o);
    if (!best || s < best_score || (s == best_score && cells[i].id < cells[*best].id)) {
      best = i;
      best_score = s;
    }
  }
  if (best && score_out) *score_out = best_score;
  return best;
}

}  // namespace

double load_score(const CellView& cell, int32_t priority, const LoadOptions& o) {
  double score = 0;
  // The map is ordered by priority: everything up to and including `priority`.
  for (auto it = cell.outstanding_tokens.begin(); it != cell.outstanding_tokens.end() && it->first <= priority; ++it)
    score += static_cast<double>(it->second);
  score += static_cast<double>(o.tokens_per_sequence) *
           static_cast<double>(std::max<int64_t>(0, cell.load.running) + std::max<int64_t>(0, cell.load.waiting));
  if (cell.load.kv_total_blocks > 0 && o.kv_low_fraction > 0) {
    const double free_fraction = std::clamp(
        static_cast<double>(cell.load.kv_free_blocks) / static_cast<double>(cell.load.kv_total_blocks), 0.0, 1.0);
    if (free_fraction < o.kv_low_fraction)
      score += static_cast<double>(o.kv_full_penalty_tokens) * (o.kv_low_fraction - free_fraction) / o.kv_low_fraction;
  }
  return score;
}

std::optional<size_t> LeastLoadPolicy::pick(const RouteRequest& r, std::span<const CellView> cells) const {
  return least_loaded(r, cells, options_, nullptr);
}

uint64_t rendezvous_weight(uint64_t key, std::string_view cell_id) {
  return XXH3_64bits_withSeed(cell_id.data(), cell_id.size(), key);
}

std::optional<size_t> PrefixAffinityPolicy::affinity_cell(const RouteRequest& r,
                                                          std::span<const CellView> cells) const {
  if (r.prefix_blocks.empty() || options_.affinity_blocks == 0) return std::nullopt;
  const uint64_t key = r.prefix_blocks[std::min(r.prefix_blocks.size(), options_.affinity_blocks) - 1];
  std::optional<size_t> best;
  uint64_t best_weight = 0;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (!takes_work(cells[i])) continue;
    const uint64_t w = rendezvous_weight(key, cells[i].id);
    if (!best || w > best_weight || (w == best_weight && cells[i].id < cells[*best].id)) {
      best = i;
      best_weight = w;
    }
  }
  return best;
}

std::optional<size_t> PrefixAffinityPolicy::pick(const RouteRequest& r, std::span<const CellView> cells) const {
  double least_score = 0;
  const std::optional<size_t> least = least_loaded(r, cells, options_.load, &least_score);
  if (!least) return std::nullopt;
  const std::optional<size_t> affinity = affinity_cell(r, cells);
  if (!affinity) return least;
  const double affinity_score = load_score(cells[*affinity], r.priority, options_.load);
  if (affinity_score - least_score > static_cast<double>(options_.max_imbalance_tokens)) return least;
  return affinity;
}

Result<std::unique_ptr<RoutingPolicy>> make_routing_policy(std::string_view name, const PolicyOptions& o) {
  if (o.load.tokens_per_sequence < 0) return Status::error("routing policy: tokens_per_sequence must be >= 0");
  if (!(o.load.kv_low_fraction >= 0 && o.load.kv_low_fraction <= 1))
    return Status::error("routing policy: kv_low_fraction must be in [0, 1]");
  if (o.load.kv_full_penalty_tokens < 0) return Status::error("routing policy: kv_full_penalty_tokens must be >= 0");
  if (name == "load") return std::unique_ptr<RoutingPolicy>(std::make_unique<LeastLoadPolicy>(o.load));
  if (name == "prefix") {
    if (o.affinity_blocks == 0) return Status::error("routing policy prefix: affinity_blocks must be >= 1");
    if (o.max_imbalance_tokens < 0) return Status::error("routing policy prefix: max_imbalance_tokens must be >= 0");
    return std::unique_ptr<RoutingPolicy>(std::make_unique<PrefixAffinityPolicy>(o));
  }
  return Status::errorf("unknown routing policy '", name, "' (expected load or prefix)");
}

}  // namespace th::cluster
