// Which matmul kernel the fast CPU backend uses for a weight type.
#pragma once

#include <string>

#include "backend/cpu/matmul_kernels.h"

namespace th::cpu {

/// @brief The kernel of the best ISA at or below `isa` that has one for `weight` (a family
/// may lack an AVX-512 variant and still have an AVX2 one), or nullptr: dequantize-and-dot.
const MatmulKernel* select_matmul_kernel(DType weight, Isa isa);

/// @brief What the backend at `isa` runs for `weight`, for reports: "q4_0 x q8_0 avx512
/// (prepared)" (weights x activation format, the kernel's ISA, whether activations are
/// rearranged once per matmul), or "dequantize + f32 dot" where no kernel exists.
std::string describe_matmul_kernel(DType weight, Isa isa);

}  // namespace th::cpu
