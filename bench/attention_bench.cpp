// Decode attention at long context: one token's q heads against n positions of f16 K/V
// (TinyLlama's shape: 32 q heads, 4 KV heads of 64), all positions in one span (before
// session 9: one kv-head group per call, the same work), one thread. CPU time per token of the whole layer; compare with the
// layer's share of a decode step (BENCHMARKS.md, "Decode at long context").
//   build/micro_bench --benchmark_filter=AttentionDecode
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/vec_ops.h"
#include "tensor/half.h"

namespace {

using namespace th;

// False (the benchmark marked skipped) when this CPU cannot run `isa`.
bool runs_isa_or_skips(benchmark::State& state, cpu::Isa isa) {
  if (cpu::has_isa(isa)) return true;
  state.SkipWithError("this CPU lacks the ISA");
  return false;
}

void BM_AttentionDecode(benchmark::State& state) {
  const auto isa = static_cast<cpu::Isa>(state.range(0));
  if (!runs_isa_or_skips(state, isa)) return;
  const int64_t n_pos = state.range(1);
  constexpr int64_t kHeads = 32, kKvHeads = 4, kHeadDim = 64, kBlock = 16;
  const int64_t kv_dim = kKvHeads * kHeadDim;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> k(static_cast<size_t>(n_pos * kv_dim)), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = f32_to_f16(normal(rng));
    v[i] = f32_to_f16(normal(rng));
  }
  std::vector<float> q(static_cast<size_t>(kHeads * kHeadDim)), out(q.size());
  for (float& x : q) x = normal(rng);
  std::vector<int32_t> table(static_cast<size_t>((n_pos + kBlock - 1) / kBlock));
  for (size_t b = 0; b < table.size(); ++b) table[b] = static_cast<int32_t>(b);
  const std::span<const int32_t> tables[1] = {table};
  const int32_t seq = 0, pos = static_cast<int32_t>(n_pos - 1), slot = pos;
  AttentionBatch batch;
  batch.n_tokens = 1;
  batch.token_seq = &seq;
  batch.token_pos = &pos;
  batch.token_slot = &slot;
  batch.seq_tables = tables;
  batch.block_size = kBlock;
  const KvLayerView kv{k.data(), v.data(), kv_dim, DType::F16};
  cpu::AttentionTask task{&kv, &batch, q.data(), out.data(), kHeads, kKvHeads, kHeadDim, 0.125f};
  cpu::AttentionScratch scratch;
  const cpu::VecOps& ops = cpu::vec_ops(isa);
  std::vector<float> part(static_cast<size_t>(kHeads * (kHeadDim + 2)));
  for (auto _ : state) {
    ops.attend_span(task, 0, 0, n_pos, scratch, part.data());
    benchmark::DoNotOptimize(part.data());
  }
  state.counters["positions"] = static_cast<double>(n_pos);
}
// Args: ISA (0 generic, 1 avx2, 2 avx512), positions.
BENCHMARK(BM_AttentionDecode)->ArgsProduct({{1, 2}, {512, 4096, 16384}})->Unit(benchmark::kMicrosecond);

// The same layer through the CPU backend's attention, as a decode step runs it (on the
// AVX-512 table: positions in spans over every kv head, shared by the threads, then merged),
// over TinyLlama's 22 layers' own K/V in turn, so that each layer's rows come from memory as
// in the model (one layer's 4 MB at 4,096 positions would stay in the last-level cache).
// Wall time per layer; args: ISA, positions, threads, K/V type (0 f16, 1 f32). 24 and 40
// positions: a short chat's decode, where the fixed cost of a call (q into lanes, merging) shows.
void BM_AttentionDecodeBackend(benchmark::State& state) {
  const auto isa = static_cast<cpu::Isa>(state.range(0));
  if (!runs_isa_or_skips(state, isa)) return;
  const int64_t n_pos = state.range(1);
  const DType type = state.range(3) == 0 ? DType::F16 : DType::F32;
  constexpr int64_t kHeads = 32, kKvHeads = 4, kHeadDim = 64, kBlock = 16, kLayers = 22;
  const int64_t kv_dim = kKvHeads * kHeadDim;
  CpuBackendOptions o;
  o.isa = isa;
  o.n_threads = static_cast<int>(state.range(2));
  const std::unique_ptr<Backend> be = make_cpu_backend(o);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t pool_floats = n_pos * kv_dim / (type == DType::F16 ? 2 : 1);  // rows in float buffers
  std::vector<float*> pools;
  for (int64_t i = 0; i < 2 * kLayers; ++i) {
    float* p = be->alloc(pool_floats);
    if (type == DType::F16) {
      auto* h = reinterpret_cast<uint16_t*>(p);
      for (int64_t e = 0; e < 2 * pool_floats; ++e) h[e] = f32_to_f16(normal(rng));
    } else {
      for (int64_t e = 0; e < pool_floats; ++e) p[e] = normal(rng);
    }
    pools.push_back(p);
  }
  float* q = be->alloc(kHeads * kHeadDim);
  float* out = be->alloc(kHeads * kHeadDim);
  for (int64_t i = 0; i < kHeads * kHeadDim; ++i) q[i] = normal(rng);
  std::vector<int32_t> table(static_cast<size_t>((n_pos + kBlock - 1) / kBlock));
  for (size_t b = 0; b < table.size(); ++b) table[b] = static_cast<int32_t>(b);
  const std::span<const int32_t> tables[1] = {table};
  const int32_t seq = 0, pos = static_cast<int32_t>(n_pos - 1), slot = pos;
  const AttentionBatch batch{1, &seq, &pos, &slot, tables, kBlock};
  int64_t layer = 0;
  for (auto _ : state) {
    const KvLayerView kv{pools[static_cast<size_t>(2 * layer)], pools[static_cast<size_t>(2 * layer + 1)], kv_dim, type};
    be->attention(kv, batch, q, out, kHeads, kKvHeads, kHeadDim, 0.125f, {});
    benchmark::DoNotOptimize(out);
    layer = (layer + 1) % kLayers;
  }
  for (float* p : pools) be->free(p);
  for (float* p : {q, out}) be->free(p);
}
BENCHMARK(BM_AttentionDecodeBackend)
    ->ArgsProduct({{1, 2}, {24, 40, 4096, 16384}, {1, 2}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
