#include "kv/prefix_cache.h"

#include <cassert>

namespace th {

PrefixCache::PrefixCache(int32_t n_blocks)
    : hash_of_(static_cast<size_t>(n_blocks)),
      cached_(static_cast<size_t>(n_blocks), 0),
      prev_(static_cast<size_t>(n_blocks), -1),
      next_(static_cast<size_t>(n_blocks), -1),
      in_lru_(static_cast<size_t>(n_blocks), 0) {}

int32_t PrefixCache::find(const BlockHash& h) const {
  auto it = by_hash_.find(h);
  return it == by_hash_.end() ? -1 : it->second;
}

void PrefixCache::insert(const BlockHash& h, int32_t block) {
  assert(!contains(block));
  const bool fresh = by_hash_.emplace(h, block).second;
  assert(fresh);
  (void)fresh;
  hash_of_[static_cast<size_t>(block)] = h;
  cached_[static_cast<size_t>(block)] = 1;
}

void PrefixCache::mark_unused(int32_t b) {
  assert(contains(b) && !is_unused(b));
  const size_t i = static_cast<size_t>(b);
  prev_[i] = tail_;
  next_[i] = -1;
  if (tail_ >= 0) next_[static_cast<size_t>(tail_)] = b;
  else head_ = b;
  tail_ = b;
  in_lru_[i] = 1;
  ++n_unused_;
}

void PrefixCache::mark_used(int32_t b) {
  assert(is_unused(b));
  const size_t i = static_cast<size_t>(b);
  if (prev_[i] >= 0) next_[static_cast<size_t>(prev_[i])] = next_[i];
  else head_ = next_[i];
  if (next_[i] >= 0) prev_[static_cast<size_t>(next_[i])] = prev_[i];
  else tail_ = prev_[i];
  prev_[i] = next_[i] = -1;
  in_lru_[i] = 0;
  --n_unused_;
}

int32_t PrefixCache::evict_oldest(BlockHash* hash) {
  const int32_t b = head_;
  if (b < 0) return -1;
  mark_used(b);
  if (hash) *hash = hash_of_[static_cast<size_t>(b)];
  by_hash_.erase(hash_of_[static_cast<size_t>(b)]);
  cached_[static_cast<size_t>(b)] = 0;
  return b;
}

std::vector<int32_t> PrefixCache::unused_blocks() const {
  std::vector<int32_t> out;
  for (int32_t b = head_; b >= 0; b = next_[static_cast<size_t>(b)]) out.push_back(b);
  return out;
}

}  // namespace th
