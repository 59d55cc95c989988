// q2_K and q3_K weights x Q8_K activations, AVX-512 VNNI, on weights repacked at load: the
// group traits of matmul_q2_k_q3_k_group.h with the two-bit fields unpacked by shifts and ands
// (CPUs without GFNI: Skylake-X, Cascade Lake).
#include "backend/cpu/matmul_q2_k_q3_k_group.h"

namespace th::cpu {

MatmulKernel with_q2_k_groups_avx512(MatmulKernel file_layout) {
  return with_kq_groups<Q2KGroup<false>, kR, kT, kR1>(file_layout);
}

MatmulKernel with_q3_k_groups_avx512(MatmulKernel file_layout) {
  return with_kq_groups<Q3KGroup<false>, kR, kT, kR1>(file_layout);
}

}  // namespace th::cpu
