// Single-thread micro-benchmarks of the Q8_K-activation kernels (q2_K, q3_K, q4_K, q5_K,
// q6_K, iq4_xs) at the best ISA this CPU runs (or $TOKENHIVE_ISA), on two TinyLlama-1.1B
// shapes: 2048 x 2048 (attention projections) and 5632 x 2048 (FFN gate/up).
//
//   n_tokens 1      decode, memory-bound: bytes/s counts weight bytes read.
//   n_tokens 32/128 prefill, compute-bound: items/s counts 2 * rows * cols * tokens ops.
//   pertoken/32     the same 32 tokens as 32 one-token calls: what re-unpacking every
//                   super-block per token costs (llama.cpp's K-quant prefill loop).
//   32000x2048/n1   the output matrix (37-52 MB): larger than the last-level cache, so
//                   this one-token case streams from DRAM.
//   q8k_convert     f32 -> Q8_K for one 2048-wide activation row.
//   packed1/...     the packed one-token loop alone (the kernel's gemm_packed, on weights
//                   packed by its pack_rows as the backend packs them) with its rows in L1 (16 x 2048),
//                   in L2 (256 x 2048) and long (16 x 16384: a row's own start and end spread
//                   over 64 groups), and from memory (65536 x 2048: 44-76 MB, one thread's
//                   stream); ns_per_512w: the time per 512 weights (BENCHMARKS "Session 23").
//                   IQ4_NL included: its activations are Q8_0.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "tensor/dtype.h"
#include "tensor/half.h"

namespace th::cpu {
namespace {

// Random bytes are valid levels, scales and mins for every K-quant (and iq4_xs); d (and dmin) are set
// to sane halves so the sums stay finite.
std::vector<uint8_t> random_weights(DType t, int64_t rows, int64_t cols) {
  std::vector<uint8_t> w(row_bytes(t, rows * cols));
  std::mt19937 rng(1);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const size_t block = dtype_info(t).type_size;
  const uint16_t d = f32_to_f16(0.01f);
  for (size_t off = 0; off < w.size(); off += block) {
    if (t == DType::Q6_K || t == DType::Q3_K) {  // d last
      std::memcpy(&w[off + block - 2], &d, 2);
    } else if (t == DType::Q2_K) {  // d, dmin last
      std::memcpy(&w[off + block - 4], &d, 2);
      std::memcpy(&w[off + block - 2], &d, 2);
    } else if (t == DType::IQ4_XS) {  // d first, then the scales' high bits
      std::memcpy(&w[off], &d, 2);
    } else {
      std::memcpy(&w[off], &d, 2);
      std::memcpy(&w[off + 2], &d, 2);
    }
  }
  return w;
}

struct Setup {
  const MatmulKernel* k;
  std::vector<uint8_t> w, act;
  std::vector<float> y;
  size_t w_row, act_row;
};

Setup setup(DType t, int64_t rows, int64_t cols, int64_t tokens) {
  Setup s;
  s.k = find_matmul_kernel(t, best_isa());
  if (!s.k) return s;  // the callers skip: no kernel
  s.w = random_weights(t, rows, cols);
  s.w_row = row_bytes(t, cols);
  s.act_row = row_bytes(s.k->act, cols);
  s.act.resize(s.act_row * tokens);
  std::vector<float> x(cols);
  std::mt19937 rng(2);
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < tokens; ++i) {
    for (auto& v : x) v = normal(rng);
    s.k->convert_act(x.data(), s.act.data() + i * s.act_row, cols);
  }
  s.y.resize(rows * tokens);
  return s;
}

void bm_gemm(benchmark::State& state, DType t, int64_t rows, int64_t cols, int64_t tokens, bool per_token) {
  Setup s = setup(t, rows, cols, tokens);
  if (!s.k) return state.SkipWithError("no kernel");
  for (auto _ : state) {
    if (per_token) {
      for (int64_t i = 0; i < tokens; ++i)
        s.k->gemm(s.w.data(), s.w_row, cols, 0, rows, s.act.data() + i * s.act_row, s.act_row, 1, s.y.data() + i * rows,
                  rows);
    } else {
      s.k->gemm(s.w.data(), s.w_row, cols, 0, rows, s.act.data(), s.act_row, tokens, s.y.data(), rows);
    }
    benchmark::DoNotOptimize(s.y.data());
    benchmark::ClobberMemory();
  }
  if (tokens == 1)
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * s.w.size()));
  else
    state.SetItemsProcessed(state.iterations() * 2 * rows * cols * tokens);
  state.SetLabel(std::string(isa_name(s.k->isa)));
}

void bm_convert(benchmark::State& state) {
  const MatmulKernel* k = find_matmul_kernel(DType::Q4_K, best_isa());
  std::vector<float> x(2048);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (auto& v : x) v = normal(rng);
  std::vector<uint8_t> out(row_bytes(DType::Q8_K, 2048));
  for (auto _ : state) {
    k->convert_act(x.data(), out.data(), 2048);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * x.size() * sizeof(float)));
  state.SetLabel(std::string(isa_name(k->isa)));
}

void bm_packed_one_token(benchmark::State& state, DType t, int64_t rows, int64_t cols) {
  Setup s = setup(t, rows, cols, 1);
  if (!s.k || !s.k->gemm_packed) return state.SkipWithError("no packed kernel");
  const size_t prb = packed_row_bytes(*s.k, s.w_row), pb = s.k->prepared_row_bytes(cols);
  auto aligned = [](std::vector<uint8_t>& v) { return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64); };
  std::vector<uint8_t> packed_bytes(prb * rows + 64), prepared_bytes(pb + 64);
  uint8_t* packed = aligned(packed_bytes);
  uint8_t* prepared = aligned(prepared_bytes);
  s.k->pack_rows(s.w.data(), s.w_row, cols, 0, rows, packed, prb);
  s.k->prepare(s.act.data(), cols, prepared);
  for (auto _ : state) {
    s.k->gemm_packed(packed, prb, cols, 0, rows, prepared, pb, 1, s.y.data(), rows);
    benchmark::DoNotOptimize(s.y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * s.w.size()));
  state.counters["ns_per_512w"] = benchmark::Counter(static_cast<double>(state.iterations()) * rows * cols / 512,
                                                      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(std::string(isa_name(s.k->isa)));
}

const bool registered = [] {
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::IQ4_XS, DType::IQ4_NL})
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{16, 2048}, {256, 2048}, {16, 16384}, {65536, 2048}})
      benchmark::RegisterBenchmark(
          ("kquant/packed1/" + std::string(dtype_name(t)) + "/" + std::to_string(rows) + "x" + std::to_string(cols))
              .c_str(),
          bm_packed_one_token, t, rows, cols);
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{2048, 2048}, {5632, 2048}}) {
      const std::string shape = std::string(dtype_name(t)) + "/" + std::to_string(rows) + "x" + std::to_string(cols);
      for (int64_t tokens : {1, 32, 128})
        benchmark::RegisterBenchmark(("kquant/" + shape + "/n" + std::to_string(tokens)).c_str(), bm_gemm, t, rows,
                                     cols, tokens, false)
            ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("kquant/" + shape + "/pertoken32").c_str(), bm_gemm, t, rows, cols, 32, true)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS})
    benchmark::RegisterBenchmark(("kquant/" + std::string(dtype_name(t)) + "/32000x2048/n1").c_str(), bm_gemm, t,
                                 32000, 2048, 1, false)
        ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("kquant/q8k_convert/2048", bm_convert);
  return true;
}();

}  // namespace
}  // namespace th::cpu
