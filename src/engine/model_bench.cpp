#include "engine/model_bench.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "kv/kv_cache.h"

namespace th {

namespace {

constexpr int64_t kBlock = 16;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct TokenSource {
  std::mt19937_64 rng;
  std::uniform_int_distribution<int32_t> dist;
  TokenSource(uint64_t seed, int64_t n_vocab) : rng(seed), dist(0, static_cast<int32_t>(n_vocab - 1)) {}
  int32_t next() { return dist(rng); }
};

Result<KvCache> make_cache(LlamaModel& model, Backend& backend, int64_t n_seqs, int64_t positions, DType kv_type) {
  const ModelConfig& c = model.config();
  const int64_t blocks_per_seq = (positions + kBlock - 1) / kBlock;
  return KvCache::create(backend, c.n_layer, c.kv_dim(), n_seqs * blocks_per_seq, kBlock, kv_type);
}

}  // namespace

Result<double> time_prefill(LlamaModel& model, Backend& backend, int64_t n_prompt, int64_t ubatch, uint64_t seed,
                            ComputeType type, DType kv_type) {
  if (n_prompt < 1 || ubatch < 1)
    return Status::errorf("bench: prompt ", n_prompt, " and ubatch ", ubatch, " must be >= 1");
  TH_ASSIGN_OR_RETURN(KvCache kv, make_cache(model, backend, 1, n_prompt, kv_type));
  std::vector<int32_t> table;
  if (!kv.reserve(table, n_prompt)) return Status::error("bench: KV cache too small");
  TokenSource tokens(seed, model.config().n_vocab);
  std::vector<ForwardBatch> chunks;
  for (int64_t start = 0; start < n_prompt; start += ubatch) {
    ForwardBatch& b = chunks.emplace_back();
    b.tables = {table};
    for (int64_t p = start; p < std::min(n_prompt, start + ubatch); ++p)
      b.add(tokens.next(), 0, static_cast<int32_t>(p), p == n_prompt - 1);
  }
  std::vector<float> logits;
  const double t0 = now_seconds();
  for (const ForwardBatch& b : chunks) TH_RETURN_IF_ERROR(model.forward(b, kv, &logits, type));
  return now_seconds() - t0;
}

Result<double> time_decode(LlamaModel& model, Backend& backend, int64_t n_seqs, int64_t n_context, int64_t n_steps,
                           uint64_t seed, ComputeType type, DType kv_type) {
  if (n_seqs < 1 || n_context < 1 || n_steps < 1)
    return Status::errorf("bench: sequences ", n_seqs, ", context ", n_context, " and steps ", n_steps,
                          " must be >= 1");
  const int64_t positions = n_context + n_steps;
  TH_ASSIGN_OR_RETURN(KvCache kv, make_cache(model, backend, n_seqs, positions, kv_type));
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(n_seqs));
  for (auto& t : tables)
    if (!kv.reserve(t, positions)) return Status::error("bench: KV cache too small");
  TokenSource tokens(seed, model.config().n_vocab);
  std::vector<float> logits;

  ForwardBatch prompt;
  for (const auto& t : tables) prompt.tables.emplace_back(t);
  for (int64_t s = 0; s < n_seqs; ++s)
    for (int64_t p = 0; p < n_context; ++p)
      prompt.add(tokens.next(), static_cast<int32_t>(s), static_cast<int32_t>(p), p == n_context - 1);
  TH_RETURN_IF_ERROR(model.forward(prompt, kv, &logits, type));

  // Every step's batch is built before the clock starts; the timed loop is forward passes only.
  std::vector<ForwardBatch> steps(static_cast<size_t>(n_steps));
  for (int64_t i = 0; i < n_steps; ++i) {
    ForwardBatch& b = steps[static_cast<size_t>(i)];
    b.tables = prompt.tables;
    for (int64_t s = 0; s < n_seqs; ++s)
      b.add(tokens.next(), static_cast<int32_t>(s), static_cast<int32_t>(n_context + i), true);
  }
  const double t0 = now_seconds();
  for (const ForwardBatch& b : steps) TH_RETURN_IF_ERROR(model.forward(b, kv, &logits, type));
  return now_seconds() - t0;
}

}  // namespace th
