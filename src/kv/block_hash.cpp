#include "kv/block_hash.h"

#include <xxhash.h>

#include <cstring>

namespace th {

namespace {
BlockHash from_xxh(XXH128_hash_t h) { return {h.low64, h.high64}; }
}  // namespace

BlockHash prefix_root(std::string_view tenant, std::string_view salt, std::string_view weights) {
  // Length-prefixed fields, so ("ab", "c") and ("a", "bc") differ.
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  const uint64_t nt = tenant.size(), ns = salt.size();
  XXH3_128bits_update(st, &nt, sizeof nt);
  XXH3_128bits_update(st, tenant.data(), tenant.size());
  XXH3_128bits_update(st, &ns, sizeof ns);
  XXH3_128bits_update(st, salt.data(), salt.size());
  // The weights that computed the KV (a compute type's copy): another copy's K/V differ, so
  // its blocks are never shared. Absent (empty) leaves the root as it was without it.
  if (!weights.empty()) {
    const uint64_t nw = weights.size();
    XXH3_128bits_update(st, &nw, sizeof nw);
    XXH3_128bits_update(st, weights.data(), weights.size());
  }
  const BlockHash h = from_xxh(XXH3_128bits_digest(st));
  XXH3_freeState(st);
  return h;
}

BlockHash hash_block(const BlockHash& parent, std::span<const int32_t> tokens) {
  // One contiguous buffer: XXH3 over a single span is its fastest path. A
  // 16-token block is 80 bytes.
  uint8_t buf[16 + 4 * 256];
  const size_t n = tokens.size_bytes();
  if (n <= sizeof buf - 16) {
    std::memcpy(buf, &parent.lo, 8);
    std::memcpy(buf + 8, &parent.hi, 8);
    std::memcpy(buf + 16, tokens.data(), n);
    return from_xxh(XXH3_128bits(buf, 16 + n));
  }
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  XXH3_128bits_update(st, &parent.lo, 8);
  XXH3_128bits_update(st, &parent.hi, 8);
  XXH3_128bits_update(st, tokens.data(), n);
  const BlockHash h = from_xxh(XXH3_128bits_digest(st));
  XXH3_freeState(st);
  return h;
}

void extend_block_hashes(std::vector<BlockHash>& hashes, const BlockHash& root, std::span<const int32_t> tokens,
                         int64_t block_size) {
  const size_t full = tokens.size() / static_cast<size_t>(block_size);
  const size_t bs = static_cast<size_t>(block_size);
  while (hashes.size() < full) {
    const size_t i = hashes.size();
    hashes.push_back(hash_block(i == 0 ? root : hashes[i - 1], tokens.subspan(i * bs, bs)));
  }
}

}  // namespace th
