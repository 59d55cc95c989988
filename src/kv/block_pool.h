// Fixed-size KV blocks by id: a reference count per block and a free list.
// The pool knows nothing of what a block holds; the tables that point at a
// block and the prefix cache each hold one reference, and a block is free
// exactly when nothing references it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace th {

class BlockPool {
 public:
  explicit BlockPool(int32_t n_blocks);

  int32_t n_blocks() const { return static_cast<int32_t>(refs_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t refcount(int32_t block) const { return refs_[static_cast<size_t>(block)]; }

  /// @brief A free block with one reference, or -1 when none is free.
  [[nodiscard]] int32_t take();
  void add_ref(int32_t block);
  /// @brief Drops one reference; returns the references left (0: the block is free again).
  int32_t release(int32_t block);

  /// @brief The free list, for invariant checks.
  const std::vector<int32_t>& free_list() const { return free_; }

 private:
  std::vector<int32_t> refs_;
  // A stack: the block freed last is reused first, while it is still warm in
  // the caches. Starts as n-1 .. 0 so a fresh pool hands out 0, 1, 2, ...
  std::vector<int32_t> free_;
};

}  // namespace th
