// A paged KV cache of one memory tier: per layer, pools of K and V rows in
// fixed-size blocks, and a BlockPool that hands the blocks out. A sequence's
// position p lives in slot table[p / block_size] * block_size + p % block_size.
// The primary tier lives in backend memory (what the forward pass reads); a
// host tier in plain host memory holds swapped-out sequences. KvCacheManager
// builds prefix reuse and swapping on two of these; `reserve`/`release` serve
// a single owner (Generator, tests) that needs neither.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"
#include "kv/block_pool.h"

namespace th {

class KvCache {
 public:
  /// @brief n_blocks blocks of block_size positions, for n_layer layers of kv_dim elements
  /// of `type` (f32, f16, bf16 or q8_0; q8_0 needs kv_dim a multiple of 32), in backend memory.
  static Result<KvCache> create(Backend& backend, int64_t n_layer, int64_t kv_dim, int64_t n_blocks,
                                int64_t block_size, DType type = DType::F32);
  /// @brief The same layout in plain host memory (the host tier): never touched by the backend's ops,
  /// only copied to and from with Backend::copy_to_host / copy_from_host.
  static Result<KvCache> create_host(int64_t n_layer, int64_t kv_dim, int64_t n_blocks, int64_t block_size,
                                     DType type = DType::F32);
  KvCache(KvCache&& o) noexcept;
  KvCache& operator=(KvCache&&) = delete;
  KvCache(const KvCache&) = delete;
  ~KvCache();

  int64_t block_size() const { return block_size_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t n_layer() const { return static_cast<int64_t>(k_.size()); }
  int64_t free_blocks() const { return pool_.n_free(); }
  KvLayerView layer(int64_t l) const { return {k_[static_cast<size_t>(l)], v_[static_cast<size_t>(l)], kv_dim_, type_}; }
  DType type() const { return type_; }
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }

  /// @brief Bytes of one block's K (or V) rows in one layer; a block's rows are contiguous.
  size_t block_bytes() const { return row_bytes(type_, kv_dim_) * static_cast<size_t>(block_size_); }
  void* k_block(int64_t l, int32_t b) const { return at(k_[static_cast<size_t>(l)], b); }
  void* v_block(int64_t l, int32_t b) const { return at(v_[static_cast<size_t>(l)], b); }

  /// @brief Grows `table` to cover n_positions positions; on failure nothing changes.
  [[nodiscard]] bool reserve(std::vector<int32_t>& table, int64_t n_positions);
  /// @brief Releases every block of `table` and clears it.
  void release(std::vector<int32_t>& table);
  /// @brief The slot of position p in a sequence with this table.
  int32_t slot(const std::vector<int32_t>& table, int64_t p) const {
    return static_cast<int32_t>(kv_slot(table, block_size_, p));
  }

 private:
  KvCache(Backend* b, int64_t kv_dim, int64_t n_blocks, int64_t block_size, DType type)
      : backend_(b), kv_dim_(kv_dim), n_blocks_(n_blocks), block_size_(block_size), type_(type),
        pool_(static_cast<int32_t>(n_blocks)) {}
  static Status check(int64_t kv_dim, int64_t n_blocks, int64_t block_size, DType type);
  int64_t pool_floats() const;
  void* at(float* base, int32_t b) const { return reinterpret_cast<uint8_t*>(base) + static_cast<size_t>(b) * block_bytes(); }

  Backend* backend_;  // null for host memory
  int64_t kv_dim_, n_blocks_, block_size_;
  DType type_;
  BlockPool pool_;
  std::vector<float*> k_, v_;
  std::vector<std::unique_ptr<float[]>> host_;  // owns k_/v_ when backend_ is null
};

}  // namespace th
