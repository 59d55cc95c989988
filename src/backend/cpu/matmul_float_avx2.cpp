// F32, F16 and BF16 weights x f32 activations, AVX2 + FMA + F16C (driver in
// matmul_float_driver.h). A tile of kR x kT = 4 x 3 keeps 12 accumulators:
// FMA latency 4 x 2 per cycle needs at least 8 in flight. Columns past the
// last multiple of 8 go through a zero-padded copy.
#include <immintrin.h>

#include "backend/cpu/matmul_float_driver.h"

namespace th::cpu {

namespace {

struct Avx2 {
  using Vec = __m256;
  static constexpr int kLanes = 8, kR = 4, kT = 3, kR1 = 4;
  static constexpr bool kMasked = false;  // tails through a padded copy
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static float hsum(Vec v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  static Vec f32(const float* p) { return _mm256_loadu_ps(p); }
  static Vec f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  // bf16 is the top half of an f32: zero-extend, shift up 16.
  static Vec bf16(const uint16_t* p) { return _mm256_castsi256_ps(_mm256_slli_epi32(widen(p), 16)); }
  static __m256i widen(const uint16_t* p) {
    return _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};

}  // namespace

extern constinit const MatmulKernel kMatmulF32Avx2 = float_kernel<Avx2, DType::F32>(Isa::Avx2);
extern constinit const MatmulKernel kMatmulF16Avx2 = float_kernel<Avx2, DType::F16>(Isa::Avx2);
extern constinit const MatmulKernel kMatmulBF16Avx2 = float_kernel<Avx2, DType::BF16>(Isa::Avx2);

}  // namespace th::cpu
