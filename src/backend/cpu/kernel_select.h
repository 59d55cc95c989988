// Which matmul kernel the fast CPU backend uses for a weight type.
#pragma once

#include "backend/cpu/matmul_kernels.h"

namespace th::cpu {

/// @brief The kernel of the best ISA at or below `isa` that has one for `weight` (a family
/// may lack an AVX-512 variant and still have an AVX2 one), or nullptr: dequantize-and-dot.
const MatmulKernel* select_matmul_kernel(DType weight, Isa isa);

}  // namespace th::cpu
