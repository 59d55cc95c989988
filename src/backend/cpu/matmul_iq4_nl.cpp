// IQ4_NL weights x Q8_0 activations, plain C++ (gemm_q8act_generic in act_q8.h): the
// reference the SIMD variants are measured against, and what a CPU without AVX2 runs.
// A block's levels are table entries (-127..113), so per block the product is exact in
// int32 as for q8_0, as ggml_vec_dot_iq4_nl_q8_0 computes it.
#include "backend/cpu/act_q8.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

struct IQ4_NLLevels {
  static constexpr size_t kBytes = sizeof(BlockIQ4_NL);
  // Element i in the low nibble of byte i, element i + 16 in the high one.
  static void levels(const uint8_t* blk, int8_t* q) {
    const uint8_t* qs = blk + offsetof(BlockIQ4_NL, qs);
    for (int i = 0; i < kQK / 2; ++i) {
      q[i] = kIq4Values[qs[i] & 0xF];
      q[i + kQK / 2] = kIq4Values[qs[i] >> 4];
    }
  }
};

}  // namespace

extern constinit const MatmulKernel kMatmulIQ4_NLGeneric = {DType::IQ4_NL, DType::Q8_0, Isa::Generic,
                                                            convert_act_q8_0_generic,
                                                            gemm_q8act_generic<IQ4_NLLevels>};

}  // namespace th::cpu
