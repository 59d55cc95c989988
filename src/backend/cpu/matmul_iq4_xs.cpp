// IQ4_XS weights x Q8_K activations, plain C++, and the family's kernel objects (built
// here, in the baseline file, so no code of an ISA file runs before the CPU check). Per
// 32-element sub-block the product of table levels and activations is exact in int32,
// scaled by ls - 32 and summed per block, then scaled by d_w * d_a, as
// ggml_vec_dot_iq4_xs_q8_K does.
#include <cstring>

#include "backend/cpu/act_q8k.h"
#include "backend/cpu/matmul_kernels.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

void gemm_iq4_xs_generic(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                         const uint8_t* act, size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  const int64_t nb = cols / kQKK;
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t t = 0; t < n_tokens; ++t) {
      float sum = 0;
      for (int64_t b = 0; b < nb; ++b) {
        BlockIQ4_XS blk;
        std::memcpy(&blk, w + r * w_row_bytes + b * sizeof blk, sizeof blk);
        BlockQ8_K a;
        std::memcpy(&a, act + t * act_row_bytes + b * sizeof a, sizeof a);
        int32_t isum = 0;
        for (int j = 0; j < 8; ++j) {
          const int ls = (((blk.scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((blk.scales_h >> (2 * j)) & 3) << 4));
          int32_t s = 0;
          for (int i = 0; i < 16; ++i) {
            s += kIq4Values[blk.qs[16 * j + i] & 0xF] * a.qs[32 * j + i];
            s += kIq4Values[blk.qs[16 * j + i] >> 4] * a.qs[32 * j + 16 + i];
          }
          isum += (ls - 32) * s;
        }
        sum += f16_to_f32(blk.d) * a.d * static_cast<float>(isum);
      }
      y[t * y_stride + r] = sum;
    }
  }
}

}  // namespace

MatmulKernel matmul_iq4_xs_generic() {
  return {DType::IQ4_XS, DType::Q8_K, Isa::Generic, quantize_row_q8_k_ref, gemm_iq4_xs_generic};
}

MatmulKernel matmul_iq4_xs_avx2() {
  return {DType::IQ4_XS, DType::Q8_K, Isa::Avx2, quantize_row_q8_k_avx2, gemm_iq4_xs_avx2};
}

// Weights repacked at load (CpuBackend::prepare_weight) run matmul_iq4_xs_avx512.cpp's
// super-block groups for every token count (their vpermb variant where the CPU has VBMI):
// within the kquant tests' rounding bound of gemm.
MatmulKernel matmul_iq4_xs_avx512() {
  return (has_avx512_vbmi() ? with_iq4_xs_groups_avx512vbmi : with_iq4_xs_groups_avx512)({
      .weight = DType::IQ4_XS,
      .act = DType::Q8_K,
      .isa = Isa::Avx512,
      .convert_act = quantize_row_q8_k_avx512,
      .gemm = gemm_iq4_xs_avx512,
      .gemm_prepared = gemm_on_q8k_part<gemm_iq4_xs_avx512>});
}

}  // namespace th::cpu
