// How big the primary KV tier is when the operator does not say (serve without
// --kv-cache-mib): derived from the model's KV cost per position and the memory left.
#pragma once

#include <cstdint>
#include <string>

namespace th {

struct KvSizing {
  int64_t blocks = 0;  // primary-tier blocks
  std::string why;     // the derivation, one line, for the start-up log
};

/// @brief Enough blocks for `max_seqs` sequences of `max_model_len` positions each, but at
/// most half of `available_bytes` (the memory left after the model's load: the other half
/// stays for the weights' page cache, activations and the rest of the machine), and at
/// least one block. A block is `block_size` positions of `block_bytes` (K and V, every layer).
KvSizing auto_kv_blocks(int64_t block_bytes, int64_t block_size, int64_t max_seqs, int64_t max_model_len,
                        int64_t available_bytes);

}  // namespace th
