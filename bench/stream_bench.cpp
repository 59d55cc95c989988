// What a loop that only streams and multiplies reaches from memory: the yardstick for the
// one-token kernels' share of the bandwidth (BENCHMARKS "Session 27", issue #18).
//
//   BM_StreamDots/read/mem/real_time/threads:<k>: k threads each read their half of 512 MiB
//   (2 MiB pages where the kernel allows) with the loop of `bench model`'s bandwidth probe
//   (machine_limits' AVX2 read_sum), in the same run. (BM_StreamRead, in matmul_bench.cpp, is
//   one thread's read.)
//
//   BM_StreamDots/<isa>/k<K>/<prefetch>/<where>/real_time/threads:<k>: the same halves, but
//   each 64-byte line (avx512: one zmm; avx2: two ymm) meets K int8 dot products (avx512:
//   `vpdpbusd`; avx2: `vpmaddubsw` and an add) into accumulators held in registers, so the
//   multiply pipes (avx2: the accumulators' chains) bind the loop and K sets its rate in
//   cache. <prefetch>: none, t1_8k (`prefetcht1` of every line 8 KiB ahead, the kernels'
//   prefetch_stream on most CPUs) or nta_8k (`prefetchnta`, its choice on Zen 5). <where>: mem
//   (the 512 MiB) or l2 (256 KiB a thread, swept 64 times an iteration).
//
// A kernel that computes at the rate of `l2` for some K streams from memory at about what
// `mem` gives for that K, if it streams as well as this loop. On the Zen 4 VM of session 27,
// two threads, at its 62-64 GB/s memory level (BENCHMARKS "Session 27"): K=10 (43 GB/s in
// cache, about q2_K's rate) reached 68-69% of the read, K=8 (54, q3_K's and IQ4_XS's) 81-85%,
// K=6 (72, IQ4_NL's) 90-100%; the prefetch cost K=2-4 (108-216 in cache) about 30 points.
// On the Zen 5 VM of session 32 (read 43-51 GB/s, 8 passes, two threads; BENCHMARKS "Session
// 32"), the share of the read in the same pass, median: K=2 none 0.97, t1_8k 0.92, nta_8k 1.11;
// K=6 0.91, 0.96, 0.90; K=10 0.90, 1.00, 1.00. (Cut into a decode's products with a barrier
// after each, nta_8k led at K=6 and K=10 too: BENCHMARKS.)
// The memory of a shared VM moves between minutes: compare the loops with the read of the
// same pass, e.g. run a few times
//   build/micro_bench --benchmark_filter='BM_StreamDots/(read|avx512/k(6|8|10))/.*threads:2'
// GCC 12's AVX-512 headers warn on _mm512_undefined_*() once inlined (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cpu/machine_limits_kernels.h"

namespace {

constexpr size_t kMemBytes = size_t{512} << 20;  // past any L3 here
constexpr size_t kL2Bytes = size_t{256} << 10;   // a thread's share when in cache
constexpr int kL2Sweeps = 64;
constexpr size_t kPrefetchAhead = 8192;

// One 2 MiB-aligned buffer for every benchmark, filled once (first touch, huge pages).
const uint8_t* buffer() {
  static uint8_t* p = [] {
    void* q = nullptr;
    if (posix_memalign(&q, size_t{2} << 20, kMemBytes) != 0) std::abort();
#ifdef MADV_HUGEPAGE
    (void)madvise(q, kMemBytes, MADV_HUGEPAGE);
#endif
    std::memset(q, 1, kMemBytes);
    return static_cast<uint8_t*>(q);
  }();
  return p;
}

// The bandwidth probe's own read (its sum of the bytes as floats: a value to keep, nothing more).
int64_t read_probe(const uint8_t* p, size_t n) {
  static const th::cpu::probe::StreamKernels k = th::cpu::probe::stream_avx2();
  return static_cast<int64_t>(k.read_sum(reinterpret_cast<const float*>(p), n / sizeof(float)));
}

// The software prefetch of a stream loop: none, prefetcht1 or prefetchnta, kPrefetchAhead ahead.
enum Prefetch { kNone, kT1, kNta };

template <Prefetch kP>
inline void prefetch_line(const uint8_t* p) {
  if constexpr (kP == kT1) _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchAhead), _MM_HINT_T1);
  if constexpr (kP == kNta) _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchAhead), _MM_HINT_NTA);
}

template <int K, Prefetch kP>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) int64_t dots_avx512(const uint8_t* p, size_t n) {
  __m512i acc[16];  // distinct starts, or the compiler merges accumulators it proves equal
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i s = _mm512_set1_epi8(3);
  for (size_t o = 0; o < n; o += 256) {
#pragma GCC unroll 4
    for (int l = 0; l < 4; ++l) {
      prefetch_line<kP>(p + o + 64 * l);
      const __m512i x = _mm512_load_si512(p + o + 64 * l);
#pragma GCC unroll 16
      for (int k = 0; k < K; ++k) acc[(l * K + k) & 15] = _mm512_dpbusd_epi32(acc[(l * K + k) & 15], x, s);
    }
  }
  __m512i t = acc[0];
#pragma GCC unroll 16
  for (int i = 1; i < 16; ++i) t = _mm512_add_epi32(t, acc[i]);
  return _mm512_reduce_add_epi32(t);
}

template <int K, Prefetch kP>
__attribute__((target("avx2"))) int64_t dots_avx2(const uint8_t* p, size_t n) {
  // 8 accumulators (AVX2 has 16 registers: more spill), each also the multiplier of its own
  // products, so that the compiler cannot compute x's product once and add it K times.
  __m256i acc[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_set1_epi16(static_cast<int16_t>(i));
  for (size_t o = 0; o < n; o += 256) {
#pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) {  // half lines
      if (l % 2 == 0) prefetch_line<kP>(p + o + 32 * l);
      const __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + o + 32 * l));
#pragma GCC unroll 16
      for (int k = 0; k < K; ++k) {
        __m256i& a = acc[(l * K + k) % 8];
        a = _mm256_add_epi16(a, _mm256_maddubs_epi16(x, a));
      }
    }
  }
  __m256i t = acc[0];
#pragma GCC unroll 8
  for (int i = 1; i < 8; ++i) t = _mm256_add_epi16(t, acc[i]);
  return _mm256_extract_epi16(t, 0);
}

using Loop = int64_t (*)(const uint8_t*, size_t);

// Each of the benchmark's threads takes its own share: half of the 512 MiB on two threads,
// or its own 256 KiB (in cache) swept kL2Sweeps times.
void run(benchmark::State& state, Loop loop, bool in_cache) {
  const uint8_t* base = buffer();
  const size_t share = in_cache ? kL2Bytes : kMemBytes / static_cast<size_t>(state.threads());
  const uint8_t* p = base + static_cast<size_t>(state.thread_index()) * (in_cache ? kMemBytes / 4 : share);
  const int sweeps = in_cache ? kL2Sweeps : 1;
  int64_t sink = 0;
  for (auto _ : state)
    for (int i = 0; i < sweeps; ++i) {
      sink += loop(p, share);
      benchmark::ClobberMemory();  // the loops only read: without this, hoisted out as pure calls
    }
  benchmark::DoNotOptimize(sink);
  state.SetBytesProcessed(state.iterations() * sweeps * static_cast<int64_t>(share));
}

template <int K>
void add_dots(const char* isa, Loop none, Loop t1, Loop nta) {
  struct Kind {
    const char* name;
    Loop loop;
  };
  for (const bool in_cache : {false, true})
    for (const Kind& k : {Kind{"none", none}, Kind{"t1_8k", t1}, Kind{"nta_8k", nta}})
      for (int threads : {1, 2}) {
        if (in_cache && k.loop != none) continue;  // nothing to fetch
        const std::string name = std::string("BM_StreamDots/") + isa + "/k" + std::to_string(K) + "/" + k.name +
                                 (in_cache ? "/l2" : "/mem");
        const Loop loop = k.loop;
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) { run(s, loop, in_cache); })
            ->Threads(threads)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
}

template <int... Ks>
void add_all(bool avx512) {
  if (avx512) (add_dots<Ks>("avx512", dots_avx512<Ks, kNone>, dots_avx512<Ks, kT1>, dots_avx512<Ks, kNta>), ...);
  (add_dots<Ks>("avx2", dots_avx2<Ks, kNone>, dots_avx2<Ks, kT1>, dots_avx2<Ks, kNta>), ...);
}

const bool registered = [] {
  if (!__builtin_cpu_supports("avx2")) return false;
  for (int threads : {1, 2})
    benchmark::RegisterBenchmark("BM_StreamDots/read/mem", [](benchmark::State& s) { run(s, read_probe, false); })
        ->Threads(threads)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  add_all<2, 4, 6, 8, 10>(__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw"));
  return true;
}();

}  // namespace
