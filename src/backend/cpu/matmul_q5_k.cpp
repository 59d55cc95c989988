// q5_K weights x Q8_K activations, plain C++: as matmul_q4_k.cpp, with the fifth bit of
// each level from qh (bit j of qh[l] belongs to element 32j + l).
#include <cstring>

#include "backend/cpu/act_q8k.h"
#include "backend/cpu/matmul_kernels.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

void unpack_q5_k(const uint8_t* row, int64_t nb, PanelK4* out) {
  for (int64_t b = 0; b < nb; ++b) {
    BlockQ5_K blk;
    std::memcpy(&blk, row + b * sizeof(BlockQ5_K), sizeof blk);
    PanelK4& p = out[b];
    unpack_k4_scales(blk.scales, f16_to_f32(blk.d), f16_to_f32(blk.dmin), p);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) {
        const int lo = 2 * c, hi = 2 * c + 1;  // sub-blocks of the low and high nibbles
        p.q[32 * lo + l] = static_cast<uint8_t>((blk.qs[32 * c + l] & 0xF) | (((blk.qh[l] >> lo) & 1) << 4));
        p.q[32 * hi + l] = static_cast<uint8_t>((blk.qs[32 * c + l] >> 4) | (((blk.qh[l] >> hi) & 1) << 4));
      }
  }
}

}  // namespace

MatmulKernel matmul_q5_k_generic() {
  return {DType::Q5_K, DType::Q8_K, Isa::Generic, quantize_row_q8_k_ref,
          gemm_kquant<PanelK4, nullptr, unpack_q5_k, panel_gemm_k4_generic>};
}

MatmulKernel matmul_q5_k_avx2() {
  return {DType::Q5_K, DType::Q8_K, Isa::Avx2, quantize_row_q8_k_avx2,
          gemm_kquant<PanelK4, gemv_q5_k_avx2, unpack_q5_k_avx2, panel_gemm_k4_avx2>};
}

// AVX-512: the AVX2 unpacking and one-token path (decode is bound by memory bandwidth,
// which wider vectors do not raise), act_q8k_avx512.cpp's core for more tokens.
MatmulKernel matmul_q5_k_avx512() {
  return {DType::Q5_K, DType::Q8_K, Isa::Avx512, quantize_row_q8_k_avx512,
          gemm_kquant<PanelK4, gemv_q5_k_avx2, unpack_q5_k_avx2, panel_gemm_k4_avx512>};
}

}  // namespace th::cpu
