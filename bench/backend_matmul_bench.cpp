// The CPU backend's matmul as a forward pass calls it: activation conversion,
// the split of rows across the thread pool, and the kernel, for the 1.1B
// (TinyLlama) layer shapes at a batch of tokens.
//
//   BM_BackendMatmul/<type>/<rows>x<cols>/t<n>/th<k>: ops (2 * rows * cols * n)
//   per second of wall time on k threads. Compare with BM_Matmul/<type>/avx2/
//   <rows>x<cols>/t<n> (one kernel call on one thread, CPU time): k times that
//   is what the split could reach.
//
// The weights are prepared as a model load prepares them (Backend::prepare_weight: Q4_0,
// Q8_0 and, on AVX-512, Q4_K repacked for the kernels); TOKENHIVE_REPACK=0 runs the file's layout instead, so the
// two are compared by running the binary twice.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "tensor/quant.h"

namespace {

using th::DType;

void BM_BackendMatmul(benchmark::State& state, DType type, int64_t rows, int64_t cols, int64_t n_tokens,
                      int threads) {
  th::CpuBackendOptions options;
  options.n_threads = threads;
  const std::unique_ptr<th::Backend> backend = th::make_cpu_backend(options);
  const size_t w_row_bytes = th::row_bytes(type, cols);
  std::vector<uint8_t> w(w_row_bytes * static_cast<size_t>(rows));
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = g(rng);
    th::quantize_row(type, row.data(), w.data() + r * w_row_bytes, cols);
  }
  std::vector<float> x(static_cast<size_t>(n_tokens * cols)), y(static_cast<size_t>(n_tokens * rows));
  for (float& v : x) v = g(rng);
  const th::WeightView wv = backend->prepare_weight(th::WeightView{type, rows, cols, w.data()});
  for (auto _ : state) {
    backend->matmul(wv, x.data(), y.data(), n_tokens);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * 2 * rows * cols * n_tokens);
}

const bool registered = [] {
  // wq/wo, wk/wv, gate/up, down, output.
  const int64_t shapes[][2] = {{2048, 2048}, {256, 2048}, {5632, 2048}, {2048, 5632}, {32000, 2048}};
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K})
    for (const auto& s : shapes)
      for (int64_t n : {1, 8, 32, 64, 128})
        for (int threads : {1, 2}) {
          if (n == 128 && t != DType::Q4_K) continue;  // q4_K's prefill tiles (issue #16)
          const std::string name = "BM_BackendMatmul/" + std::string(th::dtype_name(t)) + "/" +
                                   std::to_string(s[0]) + "x" + std::to_string(s[1]) + "/t" + std::to_string(n) +
                                   "/th" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(), BM_BackendMatmul, t, s[0], s[1], n, threads)
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
  return true;
}();

}  // namespace
