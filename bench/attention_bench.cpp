// Decode attention at long context: one token's q heads against n positions of f16 K/V
// (TinyLlama's shape: 32 q heads, 4 KV heads of 64), one kv-head group per call as the
// backend runs it, one thread. CPU time per token of the whole layer; compare with the
// layer's share of a decode step (BENCHMARKS.md, "Decode at long context").
//   build/micro_bench --benchmark_filter=AttentionDecode
#include <benchmark/benchmark.h>

#include <algorithm>

#include <random>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/vec_ops.h"
#include "tensor/half.h"

namespace {

using namespace th;

void BM_AttentionDecode(benchmark::State& state) {
  const auto isa = static_cast<cpu::Isa>(state.range(0));
  const std::vector<cpu::Isa>& have = cpu::available_isas();
  if (std::find(have.begin(), have.end(), isa) == have.end()) {
    state.SkipWithError("this CPU lacks the ISA");
    return;
  }
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
  for (auto _ : state) {
    for (int64_t h = 0; h < kKvHeads; ++h) ops.attend(task, 0, h, scratch);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["positions"] = static_cast<double>(n_pos);
}
// Args: ISA (0 generic, 1 avx2, 2 avx512), positions.
BENCHMARK(BM_AttentionDecode)->ArgsProduct({{1, 2}, {512, 4096}})->Unit(benchmark::kMicrosecond);

}  // namespace
