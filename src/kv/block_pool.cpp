#include "kv/block_pool.h"

#include <cassert>

namespace th {

BlockPool::BlockPool(int32_t n_blocks) : refs_(static_cast<size_t>(n_blocks), 0) {
  free_.reserve(static_cast<size_t>(n_blocks));
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int32_t BlockPool::take() {
  if (free_.empty()) return -1;
  const int32_t b = free_.back();
  free_.pop_back();
  assert(refs_[static_cast<size_t>(b)] == 0);
  refs_[static_cast<size_t>(b)] = 1;
  return b;
}

void BlockPool::add_ref(int32_t block) {
  assert(refs_[static_cast<size_t>(block)] > 0);  // a free block is taken, never revived
  ++refs_[static_cast<size_t>(block)];
}

int32_t BlockPool::release(int32_t block) {
  int32_t& r = refs_[static_cast<size_t>(block)];
  assert(r > 0);
  if (--r == 0) free_.push_back(block);
  return r;
}

}  // namespace th
