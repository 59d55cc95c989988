// The CPU backend's matmul as a forward pass calls it: activation conversion,
// the split of rows across the thread pool, and the kernel, for the 1.1B
// (TinyLlama) layer shapes at a batch of tokens.
//
//   BM_BackendMatmul/<type>/<rows>x<cols>/t<n>/th<k>: ops (2 * rows * cols * n)
//   per second of wall time on k threads. Compare with BM_Matmul/<type>/avx2/
//   <rows>x<cols>/t<n> (one kernel call on one thread, CPU time): k times that
//   is what the split could reach.
//
//   .../t1cold/th<k>: one token on copies of the matrix, 256 MiB in all, taken in turn
//   (bytes/s: weight bytes streamed from memory, as a decode step streams them).
//
// The weights are prepared as a model load prepares them (Backend::prepare_weight: Q4_0,
// Q8_0, IQ4_NL and, on AVX-512, the K-quants and IQ4_XS repacked for the kernels);
// TOKENHIVE_REPACK=0 runs the file's layout instead, so the two are compared by running the
// binary twice.
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
                      int threads, bool cold) {
  th::CpuBackendOptions options;
  options.n_threads = threads;
  const std::unique_ptr<th::Backend> backend = th::make_cpu_backend(options);
  const size_t w_row_bytes = th::row_bytes(type, cols);
  const size_t w_bytes = w_row_bytes * static_cast<size_t>(rows);
  std::vector<uint8_t> w(w_bytes);
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = g(rng);
    th::quantize_row(type, row.data(), w.data() + r * w_row_bytes, cols);
  }
  std::vector<float> x(static_cast<size_t>(n_tokens * cols)), y(static_cast<size_t>(n_tokens * rows));
  for (float& v : x) v = g(rng);
  // cold: copies of the matrix, 256 MiB in all, taken in turn, so each call streams its
  // weights from memory as a decode step does (one copy stays in the caches).
  const size_t copies = cold ? (size_t{256} << 20) / w_bytes + 1 : 1;
  std::vector<std::vector<uint8_t>> files(copies - 1, w);
  std::vector<th::WeightView> views{backend->prepare_weight(th::WeightView{type, rows, cols, w.data()})};
  for (auto& f : files) views.push_back(backend->prepare_weight(th::WeightView{type, rows, cols, f.data()}));
  size_t c = 0;
  for (auto _ : state) {
    backend->matmul(views[c], x.data(), y.data(), n_tokens);
    benchmark::ClobberMemory();
    c = c + 1 == copies ? 0 : c + 1;
  }
  state.SetItemsProcessed(state.iterations() * 2 * rows * cols * n_tokens);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * w_bytes));
}

const bool registered = [] {
  // wq/wo, wk/wv, gate/up, down, output.
  const int64_t shapes[][2] = {{2048, 2048}, {256, 2048}, {5632, 2048}, {2048, 5632}, {32000, 2048}};
  auto add = [](DType t, const int64_t (&s)[2], int64_t n, int threads, bool cold) {
    const std::string name = "BM_BackendMatmul/" + std::string(th::dtype_name(t)) + "/" + std::to_string(s[0]) +
                             "x" + std::to_string(s[1]) + "/t" + std::to_string(n) + (cold ? "cold" : "") + "/th" +
                             std::to_string(threads);
    benchmark::RegisterBenchmark(name.c_str(), BM_BackendMatmul, t, s[0], s[1], n, threads, cold)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  };
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K})
    for (const auto& s : shapes)
      for (int64_t n : {1, 8, 32, 64, 128})
        for (int threads : {1, 2}) {
          if (n == 128 && t != DType::Q4_K) continue;  // q4_K's prefill tiles (issue #16)
          add(t, s, n, threads, false);
        }
  // The low-bit types (issue #18): decode and small batches; t1cold: the weights from memory.
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS})
    for (const auto& s : shapes)
      for (int64_t n : {1, 8, 32})
        for (int threads : {1, 2}) add(t, s, n, threads, false);
  // q6_K, the output matrix of the low-bit files: one token, in cache (256 x 2048) and the
  // output's own shape (54 MB: from memory); and a prefill's 32 tokens (its panel tiles).
  for (int s : {1, 4})
    for (int threads : {1, 2}) add(DType::Q6_K, shapes[s], 1, threads, false);
  for (int s : {0, 4})
    for (int threads : {1, 2}) add(DType::Q6_K, shapes[s], 32, threads, false);
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS})
    for (int s : {0, 2})  // 2048 x 2048, 5632 x 2048
      for (int threads : {1, 2}) add(t, shapes[s], 1, threads, true);
  return true;
}();

}  // namespace
