// Q8_0 weights x Q8_0 activations, plain C++ (gemm_q8act_generic in act_q8.h):
// the reference the SIMD variants are measured against, and what a CPU without
// AVX2 runs. Per block the product is exact in int32 (|sum| <= 32 * 127 * 127),
// then scaled by d_w * d_x (exact in f32: two 11-bit mantissas), as
// ggml_vec_dot_q8_0_q8_0 does.
#include <cstring>

#include "backend/cpu/act_q8.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

struct Q8_0Levels {
  static constexpr size_t kBytes = sizeof(BlockQ8_0);
  static void levels(const uint8_t* blk, int8_t* q) { std::memcpy(q, blk + offsetof(BlockQ8_0, qs), kQK); }
};

}  // namespace

extern constinit const MatmulKernel kMatmulQ8_0Generic = {DType::Q8_0, DType::Q8_0, Isa::Generic,
                                                          convert_act_q8_0_generic, gemm_q8act_generic<Q8_0Levels>};

}  // namespace th::cpu
