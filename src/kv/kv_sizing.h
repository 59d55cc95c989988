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

struct SeqSizing {
  int64_t max_seqs = 0;
  std::string why;  // the derivation, one line
};

/// @brief serve without --max-num-seqs: the rule of thumb memory / per-sequence memory x 0.7
/// (the 30% left for sequences shorter than the longest sharing blocks with prefix hits, and
/// for preemption headroom), at least 1 and at most `cap`. A sequence's memory is its KV at
/// `max_model_len` positions (`position_bytes` each); `memory_bytes` is what the KV cache may
/// take (--kv-cache-mib, or half of the memory left, as auto_kv_blocks).
SeqSizing auto_max_seqs(int64_t position_bytes, int64_t max_model_len, int64_t memory_bytes, int64_t cap);

}  // namespace th
