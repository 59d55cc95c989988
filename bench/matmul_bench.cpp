// Single-thread micro-benchmarks of the matmul kernel families, with the
// ceilings they are measured against:
//  - BM_StreamRead: what one core can stream from DRAM (512 MiB, AVX2 loads).
//  - BM_Int8Peak: vpmaddubsw throughput (32 int8 MACs each, 2 ops per MAC),
//    the AVX2 int8 ceiling; BM_Int8PairPeak adds the vpmaddwd that every
//    block dot product needs after it.
//  - BM_Matmul/<type>/<isa>/<rows>x<cols>/t<n>: n = 1 reports weight bytes/s;
//    the weights cycle through copies totalling >= 256 MiB so they come from
//    DRAM, as in decode (t1hot: one copy, from L3, the kernel's own speed). n = 32, 128 report ops (2 * rows * cols * n) per second
//    on one copy (each weight is reused n times, so compute bounds it).
// Each iteration includes converting the activations, as a real matmul does.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "tensor/quant.h"

namespace {

using th::DType;
using th::cpu::Isa;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

Buffer alloc_bytes(size_t n) {
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64));
  return Buffer(p);
}

__attribute__((target("avx2"))) uint64_t stream_read(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  return static_cast<uint64_t>(_mm256_extract_epi64(s, 0) + _mm256_extract_epi64(s, 3));
}

void BM_StreamRead(benchmark::State& state) {
  const size_t n = size_t{512} << 20;
  Buffer buf = alloc_bytes(n);
  std::memset(buf.get(), 1, n);
  for (auto _ : state) benchmark::DoNotOptimize(stream_read(buf.get(), n));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}
BENCHMARK(BM_StreamRead)->Unit(benchmark::kMillisecond);

// 12 independent vpmaddubsw per iteration (in the pair variant, 6 vpmaddubsw + 6
// vpmaddwd), written in asm so the compiler can neither fold nor spill them: the
// loop runs at the instructions' throughput.
template <bool kPair>
__attribute__((target("avx2"))) void int8_loop(int64_t n) {
#define TH_UBS(i) "vpmaddubsw %%ymm13, %%ymm" #i ", %%ymm" #i "\n"
#define TH_WD(i) "vpmaddwd %%ymm13, %%ymm" #i ", %%ymm" #i "\n"
  if constexpr (kPair) {
    __asm__ volatile("vpxor %%ymm13, %%ymm13, %%ymm13\n1:\n" TH_UBS(0) TH_WD(1) TH_UBS(2) TH_WD(3) TH_UBS(4) TH_WD(5)
                         TH_UBS(6) TH_WD(7) TH_UBS(8) TH_WD(9) TH_UBS(10) TH_WD(11) "dec %0\njnz 1b\nvzeroupper\n"
                     : "+r"(n)
                     :
                     : "ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "ymm6", "ymm7", "ymm8", "ymm9", "ymm10",
                       "ymm11", "ymm13", "cc");
  } else {
    __asm__ volatile("vpxor %%ymm13, %%ymm13, %%ymm13\n1:\n" TH_UBS(0) TH_UBS(1) TH_UBS(2) TH_UBS(3) TH_UBS(4)
                         TH_UBS(5) TH_UBS(6) TH_UBS(7) TH_UBS(8) TH_UBS(9) TH_UBS(10) TH_UBS(11)
                             "dec %0\njnz 1b\nvzeroupper\n"
                     : "+r"(n)
                     :
                     : "ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "ymm6", "ymm7", "ymm8", "ymm9", "ymm10",
                       "ymm11", "ymm13", "cc");
  }
#undef TH_UBS
#undef TH_WD
}

template <bool kPair>
void BM_Int8(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx2")) {
    state.SkipWithError("no AVX2");
    return;
  }
  const int64_t n = 1 << 20;
  for (auto _ : state) {
    int8_loop<kPair>(n);
  }
  // 32 MACs (64 ops) per vpmaddubsw: 12 of them per iteration, or 6 in the pair variant.
  state.SetItemsProcessed(state.iterations() * n * (kPair ? 6 : 12) * 64);
}
void BM_Int8Peak(benchmark::State& state) { BM_Int8<false>(state); }
void BM_Int8PairPeak(benchmark::State& state) { BM_Int8<true>(state); }
BENCHMARK(BM_Int8Peak);
BENCHMARK(BM_Int8PairPeak);

void BM_Matmul(benchmark::State& state, DType type, Isa isa, int64_t rows, int64_t cols, int64_t n_tokens, bool hot) {
  const th::cpu::MatmulKernel* k = th::cpu::find_matmul_kernel(type, isa);
  const size_t w_row_bytes = th::row_bytes(type, cols);
  const size_t w_bytes = w_row_bytes * static_cast<size_t>(rows);
  const size_t copies = n_tokens == 1 && !hot ? (size_t{256} << 20) / w_bytes + 1 : 1;
  Buffer w = alloc_bytes(w_bytes * copies);
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = g(rng);
    th::quantize_row(type, row.data(), w.get() + r * w_row_bytes, cols);
  }
  for (size_t c = 1; c < copies; ++c) std::memcpy(w.get() + c * w_bytes, w.get(), w_bytes);
  std::vector<float> x(static_cast<size_t>(n_tokens * cols));
  for (float& v : x) v = g(rng);
  const size_t act_row_bytes = th::row_bytes(k->act, cols);
  Buffer act = alloc_bytes(act_row_bytes * n_tokens);
  std::vector<float> y(static_cast<size_t>(n_tokens * rows));
  size_t c = 0;
  for (auto _ : state) {
    for (int64_t t = 0; t < n_tokens; ++t) k->convert_act(x.data() + t * cols, act.get() + t * act_row_bytes, cols);
    k->gemm(w.get() + c * w_bytes, w_row_bytes, cols, 0, rows, act.get(), act_row_bytes, n_tokens, y.data(), rows);
    benchmark::ClobberMemory();
    c = c + 1 == copies ? 0 : c + 1;
  }
  if (n_tokens == 1) {
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * w_bytes));
  } else {
    state.SetItemsProcessed(state.iterations() * 2 * rows * cols * n_tokens);
  }
}

const bool registered = [] {
  const DType types[] = {DType::Q8_0, DType::Q4_0, DType::IQ4_NL, DType::F16, DType::BF16, DType::F32};
  const int64_t shapes[][2] = {{2048, 2048}, {5632, 2048}, {2048, 5632}, {128, 1024}};
  for (DType t : types) {
    for (Isa isa : th::cpu::available_isas()) {
      if (th::cpu::find_matmul_kernel(t, isa) == nullptr) continue;
      for (const auto& s : shapes) {
        for (int64_t n : {0, 1, 32, 128}) {
          // n = 0: one token on a single copy of the weights (in L3): the kernel's own speed.
          const std::string name = "BM_Matmul/" + std::string(th::dtype_name(t)) + "/" +
                                   std::string(th::cpu::isa_name(isa)) + "/" + std::to_string(s[0]) + "x" +
                                   std::to_string(s[1]) + "/t" + (n == 0 ? "1hot" : std::to_string(n));
          benchmark::RegisterBenchmark(name.c_str(), BM_Matmul, t, isa, s[0], s[1], n == 0 ? 1 : n, n == 0)
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
  return true;
}();

}  // namespace
