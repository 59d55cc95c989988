// Shared pieces of the matmul families whose activations are Q8_0 blocks
// (weights Q8_0, Q4_0 and IQ4_NL) or plain f32 (weights F32, F16, BF16): activation
// conversion in each ISA, per-thread scratch, the f16 -> f32 table, and the
// kernel objects the registry (matmul_kernels.cpp) lists.
//
// Everything here is declared in the baseline-ISA world: the *_avx2.cpp and
// *_avx512.cpp files only define functions named for their ISA, so no inline
// function compiled with AVX flags can be picked by the linker for a caller
// on a CPU without them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cpu/matmul_kernels.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

// x (n f32, n a multiple of 32) -> n / 32 Q8_0 blocks at dst: the bytes quantize_row(Q8_0)
// writes (ggml's quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d)), nan/inf included.
void convert_act_q8_0_generic(const float* x, void* dst, int64_t n);
void convert_act_q8_0_avx2(const float* x, void* dst, int64_t n);
void convert_act_q8_0_avx512(const float* x, void* dst, int64_t n);

// The f32 activation format is the row itself.
void convert_act_f32(const float* x, void* dst, int64_t n);

/// @brief f16 bits -> f32 for all 65536 values (256 KiB; the few exponents weights use stay
/// in cache). A load from this table costs no ALU work, where F16C's scalar path costs
/// three (movzx, vmovd, vcvtph2ps) per block scale.
const float* f16_table();

/// @brief A per-thread buffer of at least n floats, 64-byte aligned, one per slot (0..3).
/// Grown on demand and kept, so steady-state gemm calls do not allocate.
float* thread_scratch(int slot, size_t n);

/// @brief The plain C++ gemm of a weight format with Q8_0 activations (the reference the SIMD
/// variants are measured against, and what a CPU without AVX2 runs). W decodes a block:
/// W::kBytes its size, W::levels(block, q) its 32 levels as int8 (element order), its fp16
/// scale at its first byte. Per 32-element block the product is exact in int32, then scaled
/// by d_w * d_x and summed in f32, as ggml_vec_dot_*_q8_0 does. Each weight row is read once
/// per tile of 4 tokens, whose activations stay in L1 across rows. Instantiate it in the
/// baseline files only (matmul_q8_0.cpp, matmul_q4_0.cpp).
template <class W>
void gemm_q8act_generic(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                        const uint8_t* act, size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  constexpr int kTokens = 4;
  const int64_t nb = cols / kQK;
  const float* f16 = f16_table();
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokens) {
    const int nt = static_cast<int>(std::min<int64_t>(kTokens, n_tokens - t0));
    const BlockQ8_0* x[kTokens];
    for (int t = 0; t < nt; ++t) x[t] = reinterpret_cast<const BlockQ8_0*>(act + (t0 + t) * act_row_bytes);
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* wr = w + r * w_row_bytes;
      float acc[kTokens] = {};
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = wr + b * W::kBytes;
        int8_t q[kQK];
        W::levels(blk, q);
        uint16_t d;
        __builtin_memcpy(&d, blk, sizeof d);
        const float dw = f16[d];
        for (int t = 0; t < nt; ++t) {
          int32_t sum = 0;
          for (int i = 0; i < kQK; ++i) sum += q[i] * x[t][b].qs[i];
          acc[t] += dw * f16[x[t][b].d] * static_cast<float>(sum);
        }
      }
      for (int t = 0; t < nt; ++t) y[(t0 + t) * y_stride + r] = acc[t];
    }
  }
}

// Kernel objects, constant-initialized (no code from an ISA file runs before the CPU check).
extern const MatmulKernel kMatmulQ8_0Generic, kMatmulQ8_0Avx2, kMatmulQ8_0Avx512;
extern const MatmulKernel kMatmulQ4_0Generic, kMatmulQ4_0Avx2, kMatmulQ4_0Avx512;
extern const MatmulKernel kMatmulIQ4_NLGeneric, kMatmulIQ4_NLAvx2, kMatmulIQ4_NLAvx512;
// IQ4_NL with AVX-512 VBMI table lookups (matmul_iq4_nl_avx512vbmi.cpp), where the CPU has VBMI.
extern const MatmulKernel kMatmulIQ4_NLAvx512Vbmi;
extern const MatmulKernel kMatmulF32Generic, kMatmulF32Avx2, kMatmulF32Avx512;
extern const MatmulKernel kMatmulF16Generic, kMatmulF16Avx2, kMatmulF16Avx512;
extern const MatmulKernel kMatmulBF16Generic, kMatmulBF16Avx2, kMatmulBF16Avx512;
// BF16 x BF16 activations with vdpbf16ps (matmul_bf16_avx512bf16.cpp), where the CPU has AVX512-BF16.
extern const MatmulKernel kMatmulBF16Avx512Dot, kMatmulFp8Avx512Dot;
extern const MatmulKernel kMatmulFp8Generic, kMatmulFp8Avx2, kMatmulFp8Avx512;  // matmul_fp8*.cpp

}  // namespace th::cpu
