// Shared pieces of the matmul families whose activations are Q8_0 blocks
// (weights Q8_0 and Q4_0) or plain f32 (weights F32, F16, BF16): activation
// conversion in each ISA, per-thread scratch, the f16 -> f32 table, and the
// kernel objects the registry (matmul_kernels.cpp) lists.
//
// Everything here is declared in the baseline-ISA world: the *_avx2.cpp and
// *_avx512.cpp files only define functions named for their ISA, so no inline
// function compiled with AVX flags can be picked by the linker for a caller
// on a CPU without them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/matmul_kernels.h"

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

// Kernel objects, constant-initialized (no code from an ISA file runs before the CPU check).
extern const MatmulKernel kMatmulQ8_0Generic, kMatmulQ8_0Avx2, kMatmulQ8_0Avx512;
extern const MatmulKernel kMatmulQ4_0Generic, kMatmulQ4_0Avx2, kMatmulQ4_0Avx512;
extern const MatmulKernel kMatmulF32Generic, kMatmulF32Avx2, kMatmulF32Avx512;
extern const MatmulKernel kMatmulF16Generic, kMatmulF16Avx2, kMatmulF16Avx512;
extern const MatmulKernel kMatmulBF16Generic, kMatmulBF16Avx2, kMatmulBF16Avx512;

}  // namespace th::cpu
