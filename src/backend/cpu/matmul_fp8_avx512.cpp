// FP8_E4M3 weights x f32 activations, AVX-512 (driver and decoding in
// matmul_fp8_driver.h): 16 lanes (two per block), 4 x 4 tiles as the float family.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "backend/cpu/matmul_fp8_driver.h"

namespace th::cpu {

namespace {

struct Fp8Avx512 {
  using Vec = __m512;
  static constexpr int kLanes = 16, kR = 4, kT = 4, kR1 = 4;
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec set1(float f) { return _mm512_set1_ps(f); }
  static float hsum(Vec v) { return _mm512_reduce_add_ps(v); }
  static Vec f32(const float* p) { return _mm512_loadu_ps(p); }
  static Vec fp8(const uint8_t* p) {
    // Sign-extended, a negative code's word is 0xff00 | c: shifted left 7 its high byte leaves
    // bit 15 set, and the code's own sign bit (now bit 14) is cleared by the and.
    const __m256i c = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm512_cvtph_ps(_mm256_and_si256(_mm256_slli_epi16(c, 7), _mm256_set1_epi16(static_cast<short>(0xbf80))));
  }
};

}  // namespace

extern constinit const MatmulKernel kMatmulFp8Avx512 = fp8_kernel<Fp8Avx512>(Isa::Avx512);

}  // namespace th::cpu
