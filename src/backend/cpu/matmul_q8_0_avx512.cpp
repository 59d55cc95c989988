// Q8_0 weights x Q8_0 activations, AVX-512 VNNI (driver in act_q8_avx512.h):
// weights enter vpdpbusd as w ^ 0x80 = w + 128 (unsigned), the 128 * sum x
// term is preloaded into the accumulator, so a (row, token, block) costs
// vpdpbusd, vcvtdq2ps, vmulps and vfmadd.
#include "backend/cpu/act_q8_avx512.h"

namespace th::cpu {

namespace {

struct Q8_0Weights {
  static constexpr int kBytes = sizeof(BlockQ8_0);
  static constexpr int kOffset = 128;
  static __m256i load(const uint8_t* blk) {
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)), _mm256_set1_epi8(-128));
  }
};

}  // namespace

extern constinit const MatmulKernel kMatmulQ8_0Avx512 = {DType::Q8_0, DType::Q8_0, Isa::Avx512,
                                                         convert_act_q8_0_avx512, gemm_q8act<Q8_0Weights, 4, 4, 4>};

}  // namespace th::cpu
