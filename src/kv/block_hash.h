// Content hashes of full KV blocks, chained: a block's hash covers its parent's
// hash and its own token ids, and the chain starts from the tenant's salt. Equal
// hashes mean equal token prefixes for the same tenant, so a block found by hash
// holds exactly the K/V rows a new sequence would compute. 128 bits (XXH3) make
// an accidental collision negligible: 2^-64 even after 2^32 cached blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

namespace th {

struct BlockHash {
  uint64_t lo = 0, hi = 0;
  friend bool operator==(const BlockHash&, const BlockHash&) = default;
};

/// @brief The chain's root for a tenant and an optional extra salt: different tenants'
/// chains never meet, so they never share a cached block.
BlockHash prefix_root(std::string_view tenant, std::string_view salt, std::string_view weights = {});

/// @brief The hash of a full block holding `tokens`, after the block whose hash is `parent`.
BlockHash hash_block(const BlockHash& parent, std::span<const int32_t> tokens);

/// @brief Extends `hashes` to cover every full block of `tokens` (blocks of block_size),
/// hashing only the blocks not yet covered.
void extend_block_hashes(std::vector<BlockHash>& hashes, const BlockHash& root, std::span<const int32_t> tokens,
                         int64_t block_size);

}  // namespace th

template <>
struct std::hash<th::BlockHash> {
  size_t operator()(const th::BlockHash& h) const noexcept { return static_cast<size_t>(h.lo); }
};
