// q6_K weights x Q8_K activations, AVX-512 VNNI, on weights repacked at load: the group trait
// of matmul_q6_k_group.h with its fields unpacked by shifts, ands and ors (CPUs without GFNI).
#include "backend/cpu/matmul_q6_k_group.h"

namespace th::cpu {

MatmulKernel with_q6_k_groups_avx512(MatmulKernel file_layout) {
  return with_kq_groups<Q6KGroup<false>, kR, kT, kR1>(file_layout);
}

}  // namespace th::cpu
