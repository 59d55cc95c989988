// Warm-up before traffic: a few typical requests run through a started engine before the
// server says it is ready, so the first real request does not pay for first touches (the
// weights' pages of an mmap'd file, the KV blocks, the thread pool's and the kernels'
// scratch, the activation buffers sized for a full batch).
#pragma once

#include <cstdint>

#include "base/status.h"
#include "engine/engine.h"

namespace th {

struct WarmupOptions {
  int requests = 8;         // in total: one long prompt, the rest short (16 tokens), all at once
  int64_t n_vocab = 0;      // prompt ids are drawn below it (a fixed seed)
  int64_t long_prompt = 128;  // tokens of the long prompt (capped to what one sequence can hold)
  int64_t gen_tokens = 4;   // each generates this many (ignoring end-of-generation)
};

struct WarmupReport {
  int requests = 0;
  int64_t prompt_tokens = 0, generated_tokens = 0;
  double seconds = 0;
};

/// @brief Runs the warm-up through `engine` (started) and waits for it. Its requests use a
/// tenant of their own, so no client's prefix-cache lookup can ever hit their blocks.
Result<WarmupReport> warm_up(Engine& engine, const WarmupOptions& options);

}  // namespace th
