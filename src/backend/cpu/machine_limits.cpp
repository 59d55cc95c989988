#include "backend/cpu/machine_limits.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>

#include "backend/cpu/machine_limits_kernels.h"

namespace th::cpu {

namespace probe {

namespace {

// Generic loops: plain C++ the compiler vectorizes for the baseline ISA. They
// stand in where no SIMD variant runs; their numbers are a floor, not a peak.
constexpr int kGenericChains = 16;

double fma_generic_run(int64_t iters) {
  float acc[kGenericChains];
  for (int k = 0; k < kGenericChains; ++k) acc[k] = 0.5f + 0.01f * static_cast<float>(k);
  for (int64_t i = 0; i < iters; ++i)
    for (int k = 0; k < kGenericChains; ++k) acc[k] = acc[k] * 0.999999f + 1e-6f;
  double r = 0;
  for (float v : acc) r += v;
  return r;
}

double dot_generic_run(int64_t iters) {
  alignas(64) uint8_t u[64];
  alignas(64) int8_t w[64];
  for (int j = 0; j < 64; ++j) {
    u[j] = static_cast<uint8_t>(j & 7);
    w[j] = static_cast<int8_t>((j % 5) - 2);
  }
  uint32_t acc[kGenericChains] = {};  // unsigned: long runs wrap, as the SIMD lanes do, instead of overflowing
  for (int64_t i = 0; i < iters; ++i) {
    // The products do not depend on the accumulators: a compiler barrier that may
    // have written the operands makes each round reload them instead of computing once.
    __asm__ volatile("" : : "r"(u), "r"(w) : "memory");
    for (int b = 0; b < 64; b += kGenericChains)
      for (int k = 0; k < kGenericChains; ++k)
        acc[k] += static_cast<uint32_t>(static_cast<int32_t>(u[b + k]) * static_cast<int32_t>(w[b + k]));
  }
  double r = 0;
  for (uint32_t v : acc) r += v;
  return r;
}

double read_sum_generic(const float* x, size_t n) {
  float acc[kGenericChains] = {};
  size_t i = 0;
  for (; i + kGenericChains <= n; i += kGenericChains)
    for (int k = 0; k < kGenericChains; ++k) acc[k] += x[i + static_cast<size_t>(k)];
  double r = 0;
  for (float v : acc) r += v;
  for (; i < n; ++i) r += x[i];
  return r;
}

void triad_generic(float* a, const float* b, const float* c, float s, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

}  // namespace

PeakKernel fp32_fma_generic() { return {fma_generic_run, kGenericChains * 2.0}; }
PeakKernel int8_dot_generic() { return {dot_generic_run, 64 * 2.0}; }
StreamKernels stream_generic() { return {read_sum_generic, triad_generic}; }

}  // namespace probe

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Runs fn(i) for i in [0, n) on n threads (the caller is thread 0) and returns the
// seconds from a common start, after every thread exists, to the last finish: thread
// creation is not timed. Probes run rarely, so a thread per call costs nothing that
// matters and keeps this independent of the engine's thread pool.
double timed_parallel(int n, const std::function<void(int)>& fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n - 1));
  for (int i = 1; i < n; ++i)
    threads.emplace_back([&, i] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      fn(i);
    });
  while (ready.load() < n - 1) std::this_thread::yield();
  const double t0 = now_seconds();
  go.store(true, std::memory_order_release);
  fn(0);
  for (std::thread& t : threads) t.join();
  return now_seconds() - t0;
}

ProbeRate summarize(std::vector<double> samples) {
  ProbeRate r;
  r.samples = samples;
  std::sort(samples.begin(), samples.end());
  r.best = samples.back();
  const size_t m = samples.size();
  r.median = m % 2 ? samples[m / 2] : 0.5 * (samples[m / 2 - 1] + samples[m / 2]);
  return r;
}

// Defeats dead-code elimination of the probes' results.
std::atomic<double> g_sink{0};

probe::StreamKernels stream_kernels() {
  for (Isa i : available_isas())
    if (i == Isa::Avx2) return probe::stream_avx2();
  return probe::stream_generic();
}

// Arrays for the bandwidth probe: 2 MiB aligned and, where the kernel allows,
// backed by huge pages, so TLB misses do not pose as a bandwidth limit.
struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using FloatArray = std::unique_ptr<float[], FreeDeleter>;

FloatArray alloc_array(size_t n) {
  constexpr size_t kAlign = size_t{2} << 20;
  const size_t bytes = (n * sizeof(float) + kAlign - 1) / kAlign * kAlign;
  auto* p = static_cast<float*>(std::aligned_alloc(kAlign, bytes));
#ifdef MADV_HUGEPAGE
  if (p) ::madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return FloatArray(p);
}

Result<ComputeResult> measure_peak(const ComputeOptions& opt, const probe::PeakKernel& k, const char* what) {
  if (opt.n_threads < 1 || opt.reps < 1 || !(opt.seconds_per_rep > 0))
    return Status::errorf(what, " probe: threads ", opt.n_threads, ", reps ", opt.reps, " and seconds ",
                          opt.seconds_per_rep, " must be positive");
  // Calibrate on one thread until a run lasts long enough to time, then size the
  // rounds for the requested time. This also warms the unit up (clock and, for
  // AVX-512, the license transition happen here, not in a timed run).
  int64_t iters = 1024;
  double sink = 0;
  for (;;) {
    const double t0 = now_seconds();
    sink += k.run(iters);
    const double t = now_seconds() - t0;
    if (t >= 0.01 || iters >= (int64_t{1} << 40)) {
      iters = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * opt.seconds_per_rep / std::max(t, 1e-9)));
      break;
    }
    iters *= 4;
  }
  std::vector<double> per_thread(static_cast<size_t>(opt.n_threads));
  std::vector<double> samples;
  for (int r = 0; r < opt.reps; ++r) {
    const double t = timed_parallel(opt.n_threads, [&](int i) { per_thread[static_cast<size_t>(i)] = k.run(iters); });
    for (double v : per_thread) sink += v;
    samples.push_back(static_cast<double>(iters) * k.ops_per_iter * opt.n_threads / t / 1e9);
  }
  g_sink.store(sink, std::memory_order_relaxed);
  ComputeResult res;
  res.gops = summarize(std::move(samples));
  res.isa = opt.isa;
  res.n_threads = opt.n_threads;
  return res;
}

Status check_isa(Isa isa) {
  if (!has_isa(isa))
    return Status::errorf("probe: this CPU cannot run ", isa_name(isa), " code");
  return ok_status();
}

}  // namespace

Result<BandwidthResult> measure_bandwidth(const BandwidthOptions& opt) {
  if (opt.total_bytes < (size_t{1} << 20) || opt.n_threads < 1 || opt.reps < 1)
    return Status::errorf("bandwidth probe: size ", opt.total_bytes, " bytes (at least 1 MiB), threads ",
                          opt.n_threads, " and reps ", opt.reps, " must be positive");
  // Three arrays; each thread owns one contiguous chunk of each, a multiple of 64
  // floats (a 256-byte line pair), touched first by the thread that streams it.
  const size_t T = static_cast<size_t>(opt.n_threads);
  const size_t chunk = std::max<size_t>(64, opt.total_bytes / 3 / sizeof(float) / T / 64 * 64);
  const size_t n = chunk * T;
  FloatArray a = alloc_array(n), b = alloc_array(n), c = alloc_array(n);
  if (!a || !b || !c) return Status::errorf("bandwidth probe: cannot allocate 3 x ", n * sizeof(float), " bytes");
  timed_parallel(opt.n_threads, [&](int i) {
    const size_t lo = static_cast<size_t>(i) * chunk;
    std::fill(a.get() + lo, a.get() + lo + chunk, 0.0f);
    std::fill(b.get() + lo, b.get() + lo + chunk, 1.0f);
    std::fill(c.get() + lo, c.get() + lo + chunk, 2.0f);
  });

  const probe::StreamKernels k = stream_kernels();
  std::vector<double> partial(T);
  auto read_pass = [&] {
    return timed_parallel(opt.n_threads, [&](int i) {
      const size_t lo = static_cast<size_t>(i) * chunk;
      partial[static_cast<size_t>(i)] =
          k.read_sum(a.get() + lo, chunk) + k.read_sum(b.get() + lo, chunk) + k.read_sum(c.get() + lo, chunk);
    });
  };
  auto triad_pass = [&] {
    return timed_parallel(opt.n_threads, [&](int i) {
      const size_t lo = static_cast<size_t>(i) * chunk;
      k.triad(a.get() + lo, b.get() + lo, c.get() + lo, 0.5f, chunk);
    });
  };
  const double bytes = 3.0 * static_cast<double>(n) * sizeof(float);
  double sink = 0;
  read_pass();  // warm-up: page tables, clocks
  triad_pass();
  std::vector<double> reads, triads;
  for (int r = 0; r < opt.reps; ++r) {
    reads.push_back(bytes / read_pass() / 1e9);
    for (double v : partial) sink += v;
    triads.push_back(bytes / triad_pass() / 1e9);
  }
  sink += a[n / 2];
  g_sink.store(sink, std::memory_order_relaxed);

  BandwidthResult res;
  res.read_gb_per_s = summarize(std::move(reads));
  res.triad_gb_per_s = summarize(std::move(triads));
  res.total_bytes = 3 * n * sizeof(float);
  res.n_threads = opt.n_threads;
  return res;
}

Result<ComputeResult> measure_fp32_fma_peak(const ComputeOptions& opt) {
  TH_RETURN_IF_ERROR(check_isa(opt.isa));
  switch (opt.isa) {
    case Isa::Avx512: return measure_peak(opt, probe::fp32_fma_avx512(), "fp32 FMA");
    case Isa::Avx2: return measure_peak(opt, probe::fp32_fma_avx2(), "fp32 FMA");
    case Isa::Generic: break;
  }
  return measure_peak(opt, probe::fp32_fma_generic(), "fp32 FMA");
}

Result<ComputeResult> measure_int8_dot_peak(const ComputeOptions& opt) {
  TH_RETURN_IF_ERROR(check_isa(opt.isa));
  switch (opt.isa) {
    case Isa::Avx512: return measure_peak(opt, probe::int8_dot_avx512(), "int8 dot");
    case Isa::Avx2: return measure_peak(opt, probe::int8_dot_avx2(), "int8 dot");
    case Isa::Generic: break;
  }
  return measure_peak(opt, probe::int8_dot_generic(), "int8 dot");
}

}  // namespace th::cpu
