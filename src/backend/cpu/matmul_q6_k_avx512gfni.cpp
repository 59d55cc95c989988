// q6_K weights x Q8_K activations, AVX-512 VNNI + GFNI: matmul_q6_k_group.h's trait with its
// fields unpacked by vgf2p8affineqb (has_avx512_gfni()); the same bits as the plain variant.
#include "backend/cpu/matmul_q6_k_group.h"

namespace th::cpu {

MatmulKernel with_q6_k_groups_avx512gfni(MatmulKernel file_layout) {
  return with_kq_groups<Q6KGroup<true>, kR, kT, kR1>(file_layout);
}

}  // namespace th::cpu
