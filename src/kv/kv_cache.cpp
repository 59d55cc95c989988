#include "kv/kv_cache.h"

namespace th {

Status KvCache::check(int64_t kv_dim, int64_t n_blocks, int64_t block_size, DType type) {
  if (n_blocks < 1 || block_size < 1 || n_blocks > (int64_t{1} << 31) / block_size)
    return Status::errorf("KV cache of ", n_blocks, " blocks of ", block_size, " positions is out of range");
  if (type != DType::F32 && type != DType::F16 && type != DType::BF16 && type != DType::Q8_0)
    return Status::errorf("KV cache type ", dtype_name(type), " is not supported (f32, f16, bf16, q8_0)");
  if (kv_dim % dtype_info(type).block_size != 0)
    return Status::errorf("KV cache type ", dtype_name(type), " needs a KV row length that is a multiple of ",
                          dtype_info(type).block_size, "; this model's is ", kv_dim);
  return ok_status();
}

// The pools are allocated as floats; round each up to whole floats.
int64_t KvCache::pool_floats() const {
  return static_cast<int64_t>((block_bytes() * static_cast<size_t>(n_blocks_) + 3) / 4);
}

Result<KvCache> KvCache::create(Backend& backend, int64_t n_layer, int64_t kv_dim, int64_t n_blocks,
                                int64_t block_size, DType type) {
  TH_RETURN_IF_ERROR(check(kv_dim, n_blocks, block_size, type));
  KvCache c(&backend, kv_dim, n_blocks, block_size, type);
  for (int64_t l = 0; l < n_layer; ++l) {
    c.k_.push_back(backend.alloc(c.pool_floats()));
    c.v_.push_back(backend.alloc(c.pool_floats()));
  }
  return c;
}

Result<KvCache> KvCache::create_host(int64_t n_layer, int64_t kv_dim, int64_t n_blocks, int64_t block_size,
                                     DType type) {
  TH_RETURN_IF_ERROR(check(kv_dim, n_blocks, block_size, type));
  KvCache c(nullptr, kv_dim, n_blocks, block_size, type);
  // Left uninitialised: a large host tier then costs pages only as swaps touch them.
  for (int64_t l = 0; l < 2 * n_layer; ++l)
    c.host_.push_back(std::make_unique_for_overwrite<float[]>(static_cast<size_t>(c.pool_floats())));
  for (int64_t l = 0; l < n_layer; ++l) {
    c.k_.push_back(c.host_[static_cast<size_t>(2 * l)].get());
    c.v_.push_back(c.host_[static_cast<size_t>(2 * l + 1)].get());
  }
  return c;
}

KvCache::KvCache(KvCache&& o) noexcept
    : backend_(o.backend_), kv_dim_(o.kv_dim_), n_blocks_(o.n_blocks_), block_size_(o.block_size_), type_(o.type_),
      pool_(std::move(o.pool_)), k_(std::move(o.k_)), v_(std::move(o.v_)), host_(std::move(o.host_)) {
  o.k_.clear();
  o.v_.clear();
}

KvCache::~KvCache() {
  if (!backend_) return;  // host_ frees itself
  for (float* p : k_) backend_->free(p);
  for (float* p : v_) backend_->free(p);
}

bool KvCache::reserve(std::vector<int32_t>& table, int64_t n_positions) {
  const int64_t need = (n_positions + block_size_ - 1) / block_size_ - static_cast<int64_t>(table.size());
  if (need <= 0) return true;
  if (need > free_blocks()) return false;
  for (int64_t i = 0; i < need; ++i) table.push_back(pool_.take());
  return true;
}

void KvCache::release(std::vector<int32_t>& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) pool_.release(*it);
  table.clear();
}

}  // namespace th
