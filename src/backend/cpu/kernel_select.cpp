#include "backend/cpu/kernel_select.h"

namespace th::cpu {

const MatmulKernel* select_matmul_kernel(DType weight, Isa isa) {
  for (int i = static_cast<int>(isa); i >= static_cast<int>(Isa::Generic); --i)
    if (const MatmulKernel* k = find_matmul_kernel(weight, static_cast<Isa>(i))) return k;
  return nullptr;
}

}  // namespace th::cpu
