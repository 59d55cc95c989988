// q3_K weights x Q8_K activations, plain C++, and the family's kernel objects. A q3_K
// block is a q6_K block with 3-bit levels: d * s[g] * (q - 4), q in 0..7, s in -32..31, so
// it unpacks to PanelK6 with m32 = 4 * s and runs q6_K's cores.
#include <cstring>

#include "backend/cpu/act_q8k.h"
#include "backend/cpu/matmul_kernels.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

void unpack_q3_k(const uint8_t* row, int64_t nb, PanelK6* out) {
  for (int64_t b = 0; b < nb; ++b) {
    BlockQ3_K blk;
    std::memcpy(&blk, row + b * sizeof(BlockQ3_K), sizeof blk);
    PanelK6& p = out[b];
    // Element e = 128h + 32j + l: low bits at bit 2j of qs[32h + l], bit 2 at bit e / 32 of hmask[l].
    for (int e = 0; e < 256; ++e) {
      const int low = (blk.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      const int high = (blk.hmask[e % 32] >> (e / 32)) & 1;
      p.q[e] = static_cast<uint8_t>(low | (high << 2));
    }
    for (int g = 0; g < 16; ++g) {
      // The 6-bit scale: low nibble g / 8 of scales[g % 8], high 2 bits at 2 (g / 4) of scales[8 + g % 4].
      const int low = (blk.scales[g % 8] >> (4 * (g / 8))) & 0xF;
      const int s = (low | (((blk.scales[8 + g % 4] >> (2 * (g / 4))) & 3) << 4)) - 32;
      for (int i = 0; i < 8; ++i) p.sc[g / 2][8 * (g % 2) + i] = static_cast<int16_t>(s);
      p.m32[g] = static_cast<int16_t>(4 * s);
    }
    p.d = f16_to_f32(blk.d);
  }
}

}  // namespace

MatmulKernel matmul_q3_k_generic() {
  return {DType::Q3_K, DType::Q8_K, Isa::Generic, quantize_row_q8_k_ref,
          gemm_kquant<PanelK6, nullptr, unpack_q3_k, panel_gemm_k6_generic>};
}

MatmulKernel matmul_q3_k_avx2() {
  return {DType::Q3_K, DType::Q8_K, Isa::Avx2, quantize_row_q8_k_avx2,
          gemm_kquant<PanelK6, gemv_q3_k_avx2, unpack_q3_k_avx2, panel_gemm_k6_avx2>};
}

namespace {

// AVX-512 on the file's layout: the AVX2 unpacking and one-token path, act_q8k_avx512.cpp's
// core for more tokens (what TOKENHIVE_REPACK=0 runs).
constexpr auto gemm_q3_k_avx512 = gemm_kquant<PanelK6, gemv_q3_k_avx2, unpack_q3_k_avx2, panel_gemm_k6_avx512>;

}  // namespace

// Weights repacked at load (CpuBackend::prepare_weight) run matmul_q2_k_q3_k_group.h's
// super-block groups (their GFNI variant where the CPU has it) for every token count, one token
// included (BENCHMARKS.md, "Session 9"): within the kquant tests' rounding bound of gemm, not
// bit for bit (see that file).
MatmulKernel matmul_q3_k_avx512() {
  return (has_avx512_gfni() ? with_q3_k_groups_avx512gfni : with_q3_k_groups_avx512)({
      .weight = DType::Q3_K,
      .act = DType::Q8_K,
      .isa = Isa::Avx512,
      .convert_act = quantize_row_q8_k_avx512,
      .gemm = gemm_q3_k_avx512,
      .gemm_prepared = gemm_on_q8k_part<gemm_q3_k_avx512>});
}

}  // namespace th::cpu
