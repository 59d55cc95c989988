// Q4_0 weights x Q8_0 activations, AVX-512 VNNI (driver in act_q8_avx512.h):
// the nibbles q in 0..15 are vpdpbusd's unsigned operand as they are, and the
// -8 * sum x term is preloaded into the accumulator.
#include "backend/cpu/act_q8_avx512.h"

namespace th::cpu {

namespace {

struct Q4_0Weights {
  static constexpr int kBytes = sizeof(BlockQ4_0);
  static constexpr int kOffset = 8;
  static __m256i load(const uint8_t* blk) {
    // Bytes 0-15: low nibbles (elements 0-15); bytes 16-31: high nibbles (16-31).
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2)));
    return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0f));
  }
};

}  // namespace

extern constinit const MatmulKernel kMatmulQ4_0Avx512 = {DType::Q4_0, DType::Q8_0, Isa::Avx512,
                                                         convert_act_q8_0_avx512, gemm_q8act<Q4_0Weights, 4, 4, 4>};

}  // namespace th::cpu
