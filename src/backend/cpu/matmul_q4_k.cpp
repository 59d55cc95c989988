// q4_K weights x Q8_K activations, plain C++ (the variant every CPU runs, and the one
// the SIMD variants are checked against). Rows are unpacked to PanelK4 once per call and
// multiplied for every token by the generic core (act_q8k.cpp).
#include <cstring>

#include "backend/cpu/act_q8k.h"
#include "backend/cpu/matmul_kernels.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

void unpack_q4_k(const uint8_t* row, int64_t nb, PanelK4* out) {
  for (int64_t b = 0; b < nb; ++b) {
    BlockQ4_K blk;
    std::memcpy(&blk, row + b * sizeof(BlockQ4_K), sizeof blk);
    PanelK4& p = out[b];
    unpack_k4_scales(blk.scales, f16_to_f32(blk.d), f16_to_f32(blk.dmin), p);
    // Chunk c of 32 bytes: sub-block 2c in the low nibbles, 2c + 1 in the high ones.
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) {
        p.q[64 * c + l] = blk.qs[32 * c + l] & 0xF;
        p.q[64 * c + 32 + l] = blk.qs[32 * c + l] >> 4;
      }
  }
}

}  // namespace

MatmulKernel matmul_q4_k_generic() {
  return {DType::Q4_K, DType::Q8_K, Isa::Generic, quantize_row_q8_k_ref,
          gemm_kquant<PanelK4, nullptr, unpack_q4_k, panel_gemm_k4_generic>};
}

MatmulKernel matmul_q4_k_avx2() {
  return {DType::Q4_K, DType::Q8_K, Isa::Avx2, quantize_row_q8_k_avx2,
          gemm_kquant<PanelK4, gemv_q4_k_avx2, unpack_q4_k_avx2, panel_gemm_k4_avx2>};
}

namespace {

// AVX-512 on the file's layout: the AVX2 unpacking and one-token path (decode is bound by
// memory bandwidth, which wider vectors do not raise), act_q8k_avx512.cpp's core for more tokens.
constexpr auto gemm_q4_k_avx512 = gemm_kquant<PanelK4, gemv_q4_k_avx2, unpack_q4_k_avx2, panel_gemm_k4_avx512>;

}  // namespace

// Weights repacked at load (CpuBackend::prepare_weight) run matmul_q4_k_avx512.cpp's
// super-block groups instead, one token included: within the kquant tests' rounding bound of
// gemm, not bit for bit (see that file).
MatmulKernel matmul_q4_k_avx512() {
  return with_q4_k_groups_avx512({.weight = DType::Q4_K,
                                 .act = DType::Q8_K,
                                 .isa = Isa::Avx512,
                                 .convert_act = quantize_row_q8_k_avx512,
                                 .gemm = gemm_q4_k_avx512,
                                 .gemm_prepared = gemm_on_q8k_part<gemm_q4_k_avx512>});
}

}  // namespace th::cpu
