// Q8_0 weights x Q8_0 activations, AVX2 (driver in act_q8_avx2.h).
//
// vpmaddubsw multiplies unsigned by signed bytes, so, as in ggml, the weight's
// sign moves onto the activation: |w| * sign(x, w). |w| <= 127 keeps each pair
// sum <= 2 * 127 * 127 < 32767 (no saturation); |w| is taken once per weight
// block and reused by the tile's tokens, so a (row, token, block) costs one
// vpsignb, vpmaddubsw, vpmaddwd, vcvtdq2ps, vmulps and vfmadd.
#include "backend/cpu/act_q8_avx2.h"

namespace th::cpu {

namespace {

struct Q8_0Weights {
  static constexpr int kBytes = sizeof(BlockQ8_0);
  static constexpr int kOffset = 0;
  static __m256i load(const uint8_t* blk) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)); }
  static __m256i ubytes(__m256i w) { return _mm256_sign_epi8(w, w); }
  static __m256i sbytes(__m256i x, __m256i w) { return _mm256_sign_epi8(x, w); }
};

}  // namespace

extern constinit const MatmulKernel kMatmulQ8_0Avx2 = {DType::Q8_0, DType::Q8_0, Isa::Avx2, convert_act_q8_0_avx2,
                                                       gemm_q8act<Q8_0Weights, 4, 2, 4>};

}  // namespace th::cpu
