// Q4_0 weights x Q8_0 activations, AVX2 (driver in act_q8_avx2.h).
//
// The nibbles q in 0..15 go straight into vpmaddubsw as its unsigned operand
// (pair sums <= 2 * 15 * 127, no saturation) and the -8 offset is taken out
// per activation block (see act_q8_avx2.h): no vpsubb and no two vpsignb per
// block as in ggml. Unpacking a block is vbroadcasti128 (a load), one
// vpsrlvq (the high half by 4) and one vpand.
#include "backend/cpu/act_q8_avx2.h"

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
  static __m256i ubytes(__m256i w) { return w; }
  static __m256i sbytes(__m256i x, __m256i) { return x; }
};

}  // namespace

extern constinit const MatmulKernel kMatmulQ4_0Avx2 = {DType::Q4_0, DType::Q8_0, Isa::Avx2, convert_act_q8_0_avx2,
                                                       gemm_q8act<Q4_0Weights, 4, 2, 4>};

}  // namespace th::cpu
