#include "kv/kv_cache.h"

namespace th {

Result<KvCache> KvCache::create(Backend& backend, int64_t n_layer, int64_t kv_dim, int64_t n_blocks,
                                int64_t block_size, DType type) {
  if (n_blocks < 1 || block_size < 1 || n_blocks > (int64_t{1} << 31) / block_size)
    return Status::errorf("KV cache of ", n_blocks, " blocks of ", block_size, " positions is out of range");
  if (type != DType::F32 && type != DType::F16 && type != DType::BF16 && type != DType::Q8_0)
    return Status::errorf("KV cache type ", dtype_name(type), " is not supported (f32, f16, bf16, q8_0)");
  if (kv_dim % dtype_info(type).block_size != 0)
    return Status::errorf("KV cache type ", dtype_name(type), " needs a KV row length that is a multiple of ",
                          dtype_info(type).block_size, "; this model's is ", kv_dim);
  KvCache c(backend, kv_dim, n_blocks, block_size, type);
  // The pools are allocated as floats; round each up to whole floats.
  const int64_t n = static_cast<int64_t>((row_bytes(type, kv_dim) * static_cast<size_t>(n_blocks * block_size) + 3) / 4);
  for (int64_t l = 0; l < n_layer; ++l) {
    c.k_.push_back(backend.alloc(n));
    c.v_.push_back(backend.alloc(n));
  }
  for (int64_t b = n_blocks - 1; b >= 0; --b) c.free_.push_back(static_cast<int32_t>(b));
  return c;
}

KvCache::KvCache(KvCache&& o) noexcept
    : backend_(o.backend_), kv_dim_(o.kv_dim_), n_blocks_(o.n_blocks_), block_size_(o.block_size_), type_(o.type_),
      k_(std::move(o.k_)), v_(std::move(o.v_)), free_(std::move(o.free_)) {
  o.k_.clear();
  o.v_.clear();
}

KvCache::~KvCache() {
  for (float* p : k_) backend_->free(p);
  for (float* p : v_) backend_->free(p);
}

bool KvCache::reserve(std::vector<int32_t>& table, int64_t n_positions) {
  const int64_t need = (n_positions + block_size_ - 1) / block_size_ - static_cast<int64_t>(table.size());
  if (need <= 0) return true;
  if (need > free_blocks()) return false;
  for (int64_t i = 0; i < need; ++i) {
    table.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void KvCache::release(std::vector<int32_t>& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) free_.push_back(*it);
  table.clear();
}

}  // namespace th
