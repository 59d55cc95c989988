// q2_K weights x Q8_K activations, plain C++, and the family's kernel objects. Levels 0..3
// and the 4-bit scales go to PanelK2 (the PanelK6 layout plus dmin); the mins are folded
// in through the activation block sums: sum (d s q - dmin m) a = d s (q . a) - dmin m bsum.
#include <cstring>

#include "backend/cpu/act_q8k.h"
#include "backend/cpu/matmul_kernels.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

void unpack_q2_k(const uint8_t* row, int64_t nb, PanelK2* out) {
  for (int64_t b = 0; b < nb; ++b) {
    BlockQ2_K blk;
    std::memcpy(&blk, row + b * sizeof(BlockQ2_K), sizeof blk);
    PanelK2& p = out[b];
    // Element 128h + 32j + l: bits 2j of qs[32h + l].
    for (int e = 0; e < 256; ++e) p.q[e] = (blk.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    for (int g = 0; g < 16; ++g) {
      for (int i = 0; i < 8; ++i) p.sc[g / 2][8 * (g % 2) + i] = static_cast<int16_t>(blk.scales[g] & 0xF);
      p.mins[g] = static_cast<int16_t>(blk.scales[g] >> 4);
    }
    p.d = f16_to_f32(blk.d);
    p.dmin = f16_to_f32(blk.dmin);
  }
}

}  // namespace

MatmulKernel matmul_q2_k_generic() {
  return {DType::Q2_K, DType::Q8_K, Isa::Generic, quantize_row_q8_k_ref,
          gemm_kquant<PanelK2, nullptr, unpack_q2_k, panel_gemm_k2_generic>};
}

MatmulKernel matmul_q2_k_avx2() {
  return {DType::Q2_K, DType::Q8_K, Isa::Avx2, quantize_row_q8_k_avx2,
          gemm_kquant<PanelK2, gemv_q2_k_avx2, unpack_q2_k_avx2, panel_gemm_k2_avx2>};
}

namespace {

// AVX-512 on the file's layout: the AVX2 unpacking and one-token path, act_q8k_avx512.cpp's
// core for more tokens (what TOKENHIVE_REPACK=0 runs).
constexpr auto gemm_q2_k_avx512 = gemm_kquant<PanelK2, gemv_q2_k_avx2, unpack_q2_k_avx2, panel_gemm_k2_avx512>;

}  // namespace

// Weights repacked at load (CpuBackend::prepare_weight) run matmul_q2_k_q3_k_group.h's
// super-block groups (their GFNI variant where the CPU has it) for every token count, one token
// included (BENCHMARKS.md, "Session 9"): within the kquant tests' rounding bound of gemm, not
// bit for bit (see that file).
MatmulKernel matmul_q2_k_avx512() {
  return (has_avx512_gfni() ? with_q2_k_groups_avx512gfni : with_q2_k_groups_avx512)({
      .weight = DType::Q2_K,
      .act = DType::Q8_K,
      .isa = Isa::Avx512,
      .convert_act = quantize_row_q8_k_avx512,
      .gemm = gemm_q2_k_avx512,
      .gemm_prepared = gemm_on_q8k_part<gemm_q2_k_avx512>});
}

}  // namespace th::cpu
