#include "backend/cpu/matmul_kernels.h"

#include <cstdlib>
#include <string>

namespace th::cpu {

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Generic: return "generic";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "unknown";
}

const std::vector<Isa>& available_isas() {
  static const std::vector<Isa> isas = [] {
    std::vector<Isa> v = {Isa::Generic};
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                      __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
    if (avx2) v.push_back(Isa::Avx2);
    if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni"))
      v.push_back(Isa::Avx512);
    return v;
  }();
  return isas;
}

Isa best_isa() {
  const std::vector<Isa>& isas = available_isas();
  if (const char* env = std::getenv("TOKENHIVE_ISA"); env && *env) {
    for (Isa i : isas)
      if (isa_name(i) == env) return i;
  }
  return isas.back();
}

// K-quant families (matmul_q4_k*.cpp, matmul_q5_k*.cpp, matmul_q6_k*.cpp).
MatmulKernel matmul_q4_k_generic();
MatmulKernel matmul_q4_k_avx2();
MatmulKernel matmul_q4_k_avx512();
MatmulKernel matmul_q5_k_generic();
MatmulKernel matmul_q5_k_avx2();
MatmulKernel matmul_q5_k_avx512();
MatmulKernel matmul_q6_k_generic();
MatmulKernel matmul_q6_k_avx2();
MatmulKernel matmul_q6_k_avx512();

namespace {
// Every kernel family's variants, registered here. Families live in files
// named for their weight type and ISA (matmul_q8_0.cpp, matmul_q8_0_avx2.cpp, ...).
const std::vector<MatmulKernel>& all_kernels() {
  static const std::vector<MatmulKernel> kernels = {
      matmul_q4_k_generic(), matmul_q4_k_avx2(), matmul_q4_k_avx512(),
      matmul_q5_k_generic(), matmul_q5_k_avx2(), matmul_q5_k_avx512(),
      matmul_q6_k_generic(), matmul_q6_k_avx2(), matmul_q6_k_avx512(),
  };
  return kernels;
}
}  // namespace

const MatmulKernel* find_matmul_kernel(DType weight, Isa isa) {
  for (const MatmulKernel& k : all_kernels())
    if (k.weight == weight && k.isa == isa) return &k;
  return nullptr;
}

}  // namespace th::cpu
