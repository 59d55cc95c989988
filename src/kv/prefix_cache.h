// Full KV blocks by content hash (see block_hash.h), so that a prompt whose
// prefix was computed before skips that prefix's prefill. The cache holds one
// reference to each block it lists (the caller takes it, through BlockPool);
// blocks no sequence uses any more stay cached, in least-recently-used order,
// and are evicted only when the pool has no free block left to hand out.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"

namespace th {

class PrefixCache {
 public:
  explicit PrefixCache(int32_t n_blocks);

  /// @brief The cached block with this hash, or -1.
  int32_t find(const BlockHash& h) const;
  bool contains(int32_t block) const { return cached_[static_cast<size_t>(block)] != 0; }
  int32_t size() const { return static_cast<int32_t>(by_hash_.size()); }

  /// @brief Lists `block` under `h` (neither may be listed yet). The caller has taken
  /// the reference the cache now holds.
  void insert(const BlockHash& h, int32_t block);

  /// @brief The LRU list: cached blocks whose only reference is the cache's.
  /// mark_unused appends (most recently used last); mark_used takes a block off it.
  void mark_unused(int32_t block);
  void mark_used(int32_t block);
  bool is_unused(int32_t block) const { return in_lru_[static_cast<size_t>(block)] != 0; }
  int32_t n_unused() const { return n_unused_; }

  /// @brief Unlists the least recently used unused block and returns it (its reference,
  /// the cache's, is now the caller's to release), or -1 when no block is unused. `hash`,
  /// when given, receives the hash it was listed under (to demote it to another tier).
  [[nodiscard]] int32_t evict_oldest(BlockHash* hash = nullptr);

  /// @brief Blocks on the LRU list, oldest first (for invariant checks).
  std::vector<int32_t> unused_blocks() const;

 private:
  std::unordered_map<BlockHash, int32_t> by_hash_;
  std::vector<BlockHash> hash_of_;   // per block, valid while cached_
  std::vector<uint8_t> cached_;
  // The LRU list, intrusive over block ids so every operation is O(1).
  std::vector<int32_t> prev_, next_;
  std::vector<uint8_t> in_lru_;
  int32_t head_ = -1, tail_ = -1, n_unused_ = 0;
};

}  // namespace th
