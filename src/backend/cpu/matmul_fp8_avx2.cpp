// FP8_E4M3 weights x f32 activations, AVX2 + F16C (driver and decoding in
// matmul_fp8_driver.h): 8 lanes, 4 x 3 tiles as the float family.
#include <immintrin.h>

#include "backend/cpu/matmul_fp8_driver.h"

namespace th::cpu {

namespace {

struct Fp8Avx2 {
  using Vec = __m256;
  static constexpr int kLanes = 8, kR = 4, kT = 3, kR1 = 4;
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec set1(float f) { return _mm256_set1_ps(f); }
  static float hsum(Vec v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  static Vec f32(const float* p) { return _mm256_loadu_ps(p); }
  static Vec fp8(const uint8_t* p) {
    // Sign-extended, a negative code's word is 0xff00 | c: shifted left 7 its high byte leaves
    // bit 15 set, and the code's own sign bit (now bit 14) is cleared by the and.
    const __m128i c = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(c, 7), _mm_set1_epi16(static_cast<short>(0xbf80))));
  }
};

}  // namespace

extern constinit const MatmulKernel kMatmulFp8Avx2 = fp8_kernel<Fp8Avx2>(Isa::Avx2);

}  // namespace th::cpu
