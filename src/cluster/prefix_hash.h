// Keys for routing by prompt prefix: chained hashes of a prompt's leading
// fixed-size blocks of bytes. The router hashes the prompt text as sent (not
// tokens: it has no tokenizer), so two requests whose prompts start with the
// same bytes, a shared system prompt or few-shot preamble, get the same
// leading hashes and PrefixAffinityPolicy (routing_policy.h) can send them to
// the cell that already holds that prefix in its KV cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace th::cluster {

/// @brief Chained hashes of a prompt's fixed-size blocks of bytes
/// (XXH3_64bits_withSeed with the previous block's hash as seed, seed 0 for the
/// first): element i covers bytes [0, (i+1)*block_bytes). Only full blocks; at
/// most max_blocks. Two prompts share element i iff (with overwhelming
/// probability) they share their first (i+1)*block_bytes bytes. block_bytes 0
/// gives no blocks.
std::vector<uint64_t> prefix_block_hashes(std::string_view prompt, size_t block_bytes = 64, size_t max_blocks = 64);

}  // namespace th::cluster
