// q2_K and q3_K weights x Q8_K activations, AVX-512 VNNI + GFNI: matmul_q2_k_q3_k_group.h's
// traits with each two-bit field unpacked by one vgf2p8affineqb (low_bits<true>; q3_K's
// levels from a layout of its own, two levels and two bits of a third per byte of one source,
// a level and a bit of the third per nibble of another: Q3KGroup::pack), for CPUs with GFNI
// (has_avx512_gfni(): Ice Lake, Sapphire Rapids, Zen 4 and later). The same integer sums and
// float steps as the plain variant: the same bits.
#include "backend/cpu/matmul_q2_k_q3_k_group.h"

namespace th::cpu {

MatmulKernel with_q2_k_groups_avx512gfni(MatmulKernel file_layout) {
  return with_kq_groups<Q2KGroup<true>, kR, kT, kR1>(file_layout);
}

MatmulKernel with_q3_k_groups_avx512gfni(MatmulKernel file_layout) {
  return with_kq_groups<Q3KGroup<true>, kR, kT, kR1>(file_layout);
}

}  // namespace th::cpu
