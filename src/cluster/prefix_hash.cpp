#include "cluster/prefix_hash.h"

#include <xxhash.h>

#include <algorithm>

namespace th::cluster {

std::vector<uint64_t> prefix_block_hashes(std::string_view prompt, size_t block_bytes, size_t max_blocks) {
  std::vector<uint64_t> hashes;
  if (block_bytes == 0) return hashes;
  const size_t n = std::min(prompt.size() / block_bytes, max_blocks);
  hashes.reserve(n);
  uint64_t seed = 0;
  for (size_t i = 0; i < n; ++i) {
    seed = XXH3_64bits_withSeed(prompt.data() + i * block_bytes, block_bytes, seed);
    hashes.push_back(seed);
  }
  return hashes;
}

}  // namespace th::cluster
