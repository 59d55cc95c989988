// AVX-512 loops for the machine-limit probes (compiled with -mavx512f ... -mavx512vnni).
#include <immintrin.h>

#include "backend/cpu/machine_limits_kernels.h"

namespace th::cpu::probe {

namespace {

// Up to two 512-bit FMA pipes with a 4-cycle latency: 8 chains fill them; 16 leave
// margin and fit easily in the 32 zmm registers.
constexpr int kFmaChains = 16;

double fma_run(int64_t iters) {
  __m512 acc[kFmaChains];
  for (int k = 0; k < kFmaChains; ++k) acc[k] = _mm512_set1_ps(0.5f + 0.01f * static_cast<float>(k));
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-6f);
  for (int64_t i = 0; i < iters; ++i)
    for (int k = 0; k < kFmaChains; ++k) acc[k] = _mm512_fmadd_ps(acc[k], m, a);
  __m512 s = acc[0];
  for (int k = 1; k < kFmaChains; ++k) s = _mm512_add_ps(s, acc[k]);
  // Stored and summed here: GCC 12's _mm512_reduce_add_* warn of uninitialized lanes.
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  double r = 0;
  for (float v : out) r += v;
  return r;
}

// VNNI: one vpdpbusd is 64 u8 x s8 multiply-accumulates into 16 s32 lanes. Its
// latency (5) times up to two per cycle needs 10 chains; each chain accumulates
// into its own register, so nothing can be hoisted and no barrier is needed.
constexpr int kDotChains = 16;

double dot_run(int64_t iters) {
  __m512i acc[kDotChains];
  for (int k = 0; k < kDotChains; ++k) acc[k] = _mm512_set1_epi32(k);
  const __m512i u = _mm512_set1_epi8(3), w = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < iters; ++i)
    for (int k = 0; k < kDotChains; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], u, w);
  __m512i s = acc[0];
  for (int k = 1; k < kDotChains; ++k) s = _mm512_add_epi32(s, acc[k]);
  alignas(64) int32_t out[16];
  _mm512_store_si512(out, s);
  double r = 0;
  for (int32_t v : out) r += v;
  return r;
}

}  // namespace

PeakKernel fp32_fma_avx512() { return {fma_run, kFmaChains * 16 * 2.0}; }
PeakKernel int8_dot_avx512() { return {dot_run, kDotChains * 64 * 2.0}; }

}  // namespace th::cpu::probe
