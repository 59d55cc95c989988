// AVX2 loops for the machine-limit probes (compiled with -mavx2 -mfma).
#include <immintrin.h>

#include "backend/cpu/machine_limits_kernels.h"

namespace th::cpu::probe {

namespace {

// Two FMA pipes with a 4-5 cycle latency (Haswell to Zen 4) need 8-10 chains in
// flight; 12 leaves margin and still fits the 16 ymm registers with the operands.
constexpr int kFmaChains = 12;

double fma_run(int64_t iters) {
  __m256 acc[kFmaChains];
  for (int k = 0; k < kFmaChains; ++k) acc[k] = _mm256_set1_ps(0.5f + 0.01f * static_cast<float>(k));
  // acc * m + a converges to a / (1 - m) = 1: no overflow, no denormals.
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-6f);
  for (int64_t i = 0; i < iters; ++i)
    for (int k = 0; k < kFmaChains; ++k) acc[k] = _mm256_fmadd_ps(acc[k], m, a);
  __m256 s = acc[0];
  for (int k = 1; k < kFmaChains; ++k) s = _mm256_add_ps(s, acc[k]);
  float out[8];
  _mm256_storeu_ps(out, s);
  double r = 0;
  for (float v : out) r += v;
  return r;
}

// The int8 dot product as llama.cpp's AVX2 kernels do it: vpmaddubsw (u8 x s8 ->
// pairs summed to s16), vpmaddwd by ones (-> s32), vpaddd into the accumulator.
// 32 multiply-accumulates per chain step. Six chains with their own s8 operand
// fill both multiply pipes and fit the registers (6 acc + 6 operands + u + ones).
constexpr int kDotChains = 6;

double dot_run(int64_t iters) {
  __m256i acc[kDotChains], w[kDotChains];
  for (int k = 0; k < kDotChains; ++k) {
    acc[k] = _mm256_setzero_si256();
    w[k] = _mm256_set1_epi8(static_cast<char>(k + 1));
  }
  __m256i u = _mm256_set1_epi8(3);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < iters; ++i) {
    // Tell the compiler u may have changed (it has not; no instruction is emitted), so
    // the products, which do not depend on the accumulators, are not hoisted out of the loop.
    __asm__ volatile("" : "+x"(u));
    for (int k = 0; k < kDotChains; ++k)
      acc[k] = _mm256_add_epi32(acc[k], _mm256_madd_epi16(_mm256_maddubs_epi16(u, w[k]), ones));
  }
  __m256i s = acc[0];
  for (int k = 1; k < kDotChains; ++k) s = _mm256_add_epi32(s, acc[k]);
  alignas(32) int32_t out[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), s);
  double r = 0;
  for (int32_t v : out) r += v;
  return r;
}

double read_sum(const float* x, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + i + 24));
  }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  float out[8];
  _mm256_storeu_ps(out, s);
  double r = 0;
  for (float v : out) r += v;
  for (; i < n; ++i) r += x[i];
  return r;
}

// A plain loop: the compiler vectorizes it with this file's AVX2 flags.
void triad(float* a, const float* b, const float* c, float s, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

}  // namespace

PeakKernel fp32_fma_avx2() { return {fma_run, kFmaChains * 8 * 2.0}; }
PeakKernel int8_dot_avx2() { return {dot_run, kDotChains * 32 * 2.0}; }
StreamKernels stream_avx2() { return {read_sum, triad}; }

}  // namespace th::cpu::probe
