// Q4_0 weights x Q8_0 activations, plain C++ (gemm_q8act_generic in act_q8.h):
// the reference the SIMD variants are measured against, and what a CPU without
// AVX2 runs. Per block the product sum (q - 8) * x is exact in int32, as
// ggml_vec_dot_q4_0_q8_0 computes it.
#include "backend/cpu/act_q8.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

struct Q4_0Levels {
  static constexpr size_t kBytes = sizeof(BlockQ4_0);
  // Element i in the low nibble of byte i, element i + 16 in the high one.
  static void levels(const uint8_t* blk, int8_t* q) {
    const uint8_t* qs = blk + offsetof(BlockQ4_0, qs);
    for (int i = 0; i < kQK / 2; ++i) {
      q[i] = static_cast<int8_t>((qs[i] & 0xF) - 8);
      q[i + kQK / 2] = static_cast<int8_t>((qs[i] >> 4) - 8);
    }
  }
};

}  // namespace

extern constinit const MatmulKernel kMatmulQ4_0Generic = {DType::Q4_0, DType::Q8_0, Isa::Generic,
                                                          convert_act_q8_0_generic, gemm_q8act_generic<Q4_0Levels>};

}  // namespace th::cpu
