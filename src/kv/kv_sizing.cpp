#include "kv/kv_sizing.h"

#include <algorithm>
#include <cstdio>

namespace th {

namespace {

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

KvSizing auto_kv_blocks(int64_t block_bytes, int64_t block_size, int64_t max_seqs, int64_t max_model_len,
                        int64_t available_bytes) {
  block_bytes = std::max<int64_t>(block_bytes, 1);
  block_size = std::max<int64_t>(block_size, 1);
  const int64_t blocks_per_seq = (std::max<int64_t>(max_model_len, 1) + block_size - 1) / block_size;
  const int64_t wanted = std::max<int64_t>(max_seqs, 1) * blocks_per_seq;
  const int64_t affordable = std::max<int64_t>(available_bytes, 0) / 2 / block_bytes;
  KvSizing s;
  s.blocks = std::max<int64_t>(1, std::min(wanted, affordable));
  s.why = "KV cache " + mib(s.blocks * block_bytes) + ": " + std::to_string(max_seqs) + " sequences x " +
          std::to_string(max_model_len) + " positions x " + std::to_string(block_bytes / block_size) +
          " bytes wanted " + mib(wanted * block_bytes) + ", half of the " + mib(available_bytes) +
          " available is " + mib(affordable * block_bytes) + " (--kv-cache-mib sets it)";
  return s;
}

SeqSizing auto_max_seqs(int64_t position_bytes, int64_t max_model_len, int64_t memory_bytes, int64_t cap) {
  const int64_t per_seq = std::max<int64_t>(position_bytes, 1) * std::max<int64_t>(max_model_len, 1);
  const double fit = 0.7 * static_cast<double>(std::max<int64_t>(memory_bytes, 0)) / static_cast<double>(per_seq);
  cap = std::max<int64_t>(cap, 1);
  SeqSizing s;
  s.max_seqs = fit >= static_cast<double>(cap) ? cap : std::max<int64_t>(1, static_cast<int64_t>(fit));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", fit);
  s.why = "max sequences " + std::to_string(s.max_seqs) + ": " + mib(memory_bytes) + " for the KV cache / " +
          mib(per_seq) + " per sequence (" + std::to_string(max_model_len) + " positions) x 0.7 = " + buf +
          ", within [1, " + std::to_string(cap) + "] (--max-num-seqs sets it)";
  return s;
}

}  // namespace th

