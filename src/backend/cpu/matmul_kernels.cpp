#include "backend/cpu/matmul_kernels.h"

#include "backend/cpu/act_q8.h"

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

namespace {
// Every kernel family's variants, registered here. Families live in files
// named for their weight type and ISA (matmul_q8_0.cpp, matmul_q8_0_avx2.cpp, ...).
const std::vector<MatmulKernel>& all_kernels() {
  static const std::vector<MatmulKernel> kernels = {
      // Q8_0-activation and f32-activation families (act_q8.h).
      kMatmulQ8_0Generic, kMatmulQ8_0Avx2, kMatmulQ8_0Avx512,
      kMatmulQ4_0Generic, kMatmulQ4_0Avx2, kMatmulQ4_0Avx512,
      kMatmulF32Generic,  kMatmulF32Avx2,  kMatmulF32Avx512,
      kMatmulF16Generic,  kMatmulF16Avx2,  kMatmulF16Avx512,
      kMatmulBF16Generic, kMatmulBF16Avx2, kMatmulBF16Avx512,
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
