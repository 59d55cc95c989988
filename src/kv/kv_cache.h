// A paged KV cache: per layer, pools of K and V rows in fixed-size blocks, and
// per-sequence block tables. A sequence's position p lives in slot
// table[p / block_size] * block_size + p % block_size. The serving engine's
// prefix reuse and host tier build on this.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"

namespace th {

class KvCache {
 public:
  /// @brief n_blocks blocks of block_size positions, for n_layer layers of kv_dim elements
  /// of `type` (f32, f16, bf16 or q8_0; q8_0 needs kv_dim a multiple of 32).
  static Result<KvCache> create(Backend& backend, int64_t n_layer, int64_t kv_dim, int64_t n_blocks,
                                int64_t block_size, DType type = DType::F32);
  KvCache(KvCache&& o) noexcept;
  KvCache& operator=(KvCache&&) = delete;
  KvCache(const KvCache&) = delete;
  ~KvCache();

  int64_t block_size() const { return block_size_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  KvLayerView layer(int64_t l) const { return {k_[l], v_[l], kv_dim_, type_}; }
  DType type() const { return type_; }

  /// @brief Grows `table` to cover n_positions positions; on failure nothing changes.
  [[nodiscard]] bool reserve(std::vector<int32_t>& table, int64_t n_positions);
  /// @brief Returns every block of `table` to the pool and clears it.
  void release(std::vector<int32_t>& table);
  /// @brief The slot of position p in a sequence with this table.
  int32_t slot(const std::vector<int32_t>& table, int64_t p) const {
    return static_cast<int32_t>(table[static_cast<size_t>(p / block_size_)] * block_size_ + p % block_size_);
  }

 private:
  KvCache(Backend& b, int64_t kv_dim, int64_t n_blocks, int64_t block_size, DType type)
      : backend_(&b), kv_dim_(kv_dim), n_blocks_(n_blocks), block_size_(block_size), type_(type) {}
  Backend* backend_;
  int64_t kv_dim_, n_blocks_, block_size_;
  DType type_;
  std::vector<float*> k_, v_;
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
};

}  // namespace th
