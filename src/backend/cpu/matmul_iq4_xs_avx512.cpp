// IQ4_XS weights x Q8_K activations, AVX-512 VNNI: on the file's layout the AVX2 tile with
// vpdpwssd for the scale multiply and add (matmul_iq4_xs_tile.h); on weights repacked at load
// kquant_groups_avx512.h's super-block groups, whose trait is matmul_iq4_xs_group.h's
// (with_iq4_xs_groups_avx512, act_q8k.h, adds their prepare hooks, pack_rows and packed gemm
// to the kernel).
//
// The file's-layout tile spends per 32-element sub-block and token about 10 ymm ops (a
// 16-byte load, shift, insert, mask, the level lookup, vpabsb, the scale's vpshufb, then
// vpsignb, vpmaddubsw, vpdpwssd): 80 per super-block of 136 bytes, about 10 GB/s of compute
// per core here. Packed, lane l of a zmm register stands for elements 16l .. 16l + 15 (half
// of sub-block l / 2), register k holding elements 16l + 4k .. 16l + 4k + 3, as q4_K's
// (matmul_q4_k_avx512.cpp), with IQ4_NL's unsigned table (matmul_iq4_nl_group.h): levels
// + 128 (1..241), so vpdpbusd multiplies them as u8 and the prepared activations carry
// -128 * bsums[l] per lane to start from. Per (row, token, super-block):
//   2 loads, 2 shifts, 4 ands, 4 vpshufb (the 16 levels)      the row's, shared by the tile
//     (with VBMI, matmul_iq4_xs_avx512vbmi.cpp: 4 vpermb and no ands)
//   dot  = 4 vpdpbusd from -128 * bsums[l]                     exact: sum level * x
//   acc += cvt(dot) * (d (ls_j - 32) * d_a)                   lanes 2j, 2j + 1
//
// Packed super-block (136 bytes, the file's size): registers a, b (w0 = a & 15, w1 = a >> 4,
// w2 = b & 15, w3 = b >> 4, byte 4l + i of w_k the nibble of element 16l + 4k + i), and a
// header of 64 bits (a packed row holds its images, then its headers: kq_split): d (fp16) in bits 0-15, ls_j - 32 (6-bit two's complement) in bits 16 + 6j
// .. 21 + 6j. One broadcast qword, a shift left per lane and an arithmetic shift right give
// the eight scales sign-extended in 64-bit lanes (9 ops a super-block to d * (ls_j - 32) in
// its lanes, where the file's 6-bit split, scales_h and scales_l, took 19; BENCHMARKS
// "Session 21").
//
// Rounding: integer sums exact in both paths; this path scales each lane's sum, the tile each
// super-block's scaled sum, so packed results are within the kquant tests' 2e-5 * sum |w x|
// of gemm, not bit for bit.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "backend/cpu/matmul_iq4_xs_group.h"

namespace th::cpu {

void gemm_iq4_xs_avx512(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                        const uint8_t* act, size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  gemm_iq4_xs<true>(w, w_row_bytes, cols, r0, r1, act, act_row_bytes, n_tokens, y, y_stride);
}

MatmulKernel with_iq4_xs_groups_avx512(MatmulKernel file_layout) {
  return with_kq_groups<IQ4XSGroup<false>, kR, kT, kR1>(file_layout);
}

}  // namespace th::cpu
