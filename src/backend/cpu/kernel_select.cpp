#include "backend/cpu/kernel_select.h"

namespace th::cpu {

const MatmulKernel* select_matmul_kernel(DType weight, Isa isa) {
  for (int i = static_cast<int>(isa); i >= static_cast<int>(Isa::Generic); --i)
    if (const MatmulKernel* k = find_matmul_kernel(weight, static_cast<Isa>(i))) return k;
  return nullptr;
}

std::string describe_matmul_kernel(DType weight, Isa isa) {
  const MatmulKernel* k = select_matmul_kernel(weight, isa);
  if (k == nullptr) return std::string(dtype_name(weight)) + ": dequantize + f32 dot";
  std::string s = std::string(dtype_name(k->weight)) + " x " + std::string(dtype_name(k->act)) + " " +
                  std::string(isa_name(k->isa));
  if (k->prepare != nullptr) s += " (prepared)";
  return s;
}

}  // namespace th::cpu
