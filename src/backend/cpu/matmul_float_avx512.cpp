// F32, F16 and BF16 weights x f32 activations, AVX-512 (driver in
// matmul_float_driver.h): 16 lanes, a 4 x 4 tile (16 of the 32 zmm registers
// as accumulators), and masked loads for the last columns.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wall reports as
// uninitialized (GCC bug 105593, fixed in 12.3).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "backend/cpu/matmul_float_driver.h"

namespace th::cpu {

namespace {

struct Avx512 {
  using Vec = __m512;
  static constexpr int kLanes = 16, kR = 4, kT = 4, kR1 = 4;
  static constexpr bool kMasked = true;
  // The first n lanes (all by default).
  static __mmask16 lanes(int n) { return n == kLanes ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1); }
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static float hsum(Vec v) { return _mm512_reduce_add_ps(v); }
  static Vec f32(const float* p, int n = kLanes) { return _mm512_maskz_loadu_ps(lanes(n), p); }
  static Vec f16(const uint16_t* p, int n = kLanes) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes(n), p)); }
  static Vec bf16(const uint16_t* p, int n = kLanes) {  // the top half of an f32
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(lanes(n), p)), 16));
  }
};

}  // namespace

extern constinit const MatmulKernel kMatmulF32Avx512 = float_kernel<Avx512, DType::F32>(Isa::Avx512);
extern constinit const MatmulKernel kMatmulF16Avx512 = float_kernel<Avx512, DType::F16>(Isa::Avx512);
extern constinit const MatmulKernel kMatmulBF16Avx512 = float_kernel<Avx512, DType::BF16>(Isa::Avx512);

}  // namespace th::cpu
