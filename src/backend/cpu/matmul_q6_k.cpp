// q6_K weights x Q8_K activations, plain C++. Levels are kept unsigned (0..63) and the
// -32 offset is folded in through the activation block sums: sum s * (q - 32) * a =
// s * sum q * a - 32 * s * bsum, one multiply per 16 elements instead of 16.
#include <cstring>

#include "backend/cpu/act_q8k.h"
#include "backend/cpu/matmul_kernels.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

void unpack_q6_k(const uint8_t* row, int64_t nb, PanelK6* out) {
  for (int64_t b = 0; b < nb; ++b) {
    BlockQ6_K blk;
    std::memcpy(&blk, row + b * sizeof(BlockQ6_K), sizeof blk);
    PanelK6& p = out[b];
    // Each 128-element half h: quarters 0/1 in the low nibbles of ql[64h + l], ql[64h + 32 + l],
    // quarters 2/3 in their high nibbles; quarter g's top two bits at bit 2g of qh[32h + l].
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 32; ++l) {
        const uint8_t a = blk.ql[64 * h + l], c = blk.ql[64 * h + 32 + l], hb = blk.qh[32 * h + l];
        uint8_t* q = p.q + 128 * h + l;
        q[0] = static_cast<uint8_t>((a & 0xF) | ((hb & 3) << 4));
        q[32] = static_cast<uint8_t>((c & 0xF) | (((hb >> 2) & 3) << 4));
        q[64] = static_cast<uint8_t>((a >> 4) | (((hb >> 4) & 3) << 4));
        q[96] = static_cast<uint8_t>((c >> 4) | (((hb >> 6) & 3) << 4));
      }
    for (int g = 0; g < 16; ++g) {
      for (int i = 0; i < 8; ++i) p.sc[g / 2][8 * (g % 2) + i] = blk.scales[g];
      p.m32[g] = static_cast<int16_t>(32 * blk.scales[g]);
    }
    p.d = f16_to_f32(blk.d);
  }
}

}  // namespace

MatmulKernel matmul_q6_k_generic() {
  return {DType::Q6_K, DType::Q8_K, Isa::Generic, quantize_row_q8_k_ref,
          gemm_kquant<PanelK6, nullptr, unpack_q6_k, panel_gemm_k6_generic>};
}

MatmulKernel matmul_q6_k_avx2() {
  return {DType::Q6_K, DType::Q8_K, Isa::Avx2, quantize_row_q8_k_avx2,
          gemm_kquant<PanelK6, gemv_q6_k_avx2, unpack_q6_k_avx2, panel_gemm_k6_avx2>};
}

namespace {

// AVX-512 on the file's layout: the AVX2 unpacking and one-token path (decode is bound by
// memory bandwidth, which wider vectors do not raise), act_q8k_avx512.cpp's core for more tokens.
constexpr auto gemm_q6_k_avx512 = gemm_kquant<PanelK6, gemv_q6_k_avx2, unpack_q6_k_avx2, panel_gemm_k6_avx512>;

}  // namespace

// Weights repacked at load (CpuBackend::prepare_weight) run matmul_q6_k_group.h's super-block
// groups (their GFNI variant where the CPU has GFNI), one token included; within the kquant
// tests' rounding bound of gemm, not bit for bit (see that file).
MatmulKernel matmul_q6_k_avx512() {
  return (has_avx512_gfni() ? with_q6_k_groups_avx512gfni : with_q6_k_groups_avx512)({
      .weight = DType::Q6_K,
      .act = DType::Q8_K,
      .isa = Isa::Avx512,
      .convert_act = quantize_row_q8_k_avx512,
      .gemm = gemm_q6_k_avx512,
      .gemm_prepared = gemm_on_q8k_part<gemm_q6_k_avx512>});
}

}  // namespace th::cpu
