// IQ4_XS weights x Q8_K activations, AVX-512 VNNI + VBMI: matmul_iq4_xs_avx512.cpp's groups
// with the levels looked up by vpermb (matmul_iq4_xs_group.h, kVbmi), for CPUs with VBMI
// (has_avx512_vbmi(): Ice Lake, Sapphire Rapids, Zen 4 and later). The same integer sums and
// float steps as the plain variant: the same bits.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "backend/cpu/matmul_iq4_xs_group.h"

namespace th::cpu {

MatmulKernel with_iq4_xs_groups_avx512vbmi(MatmulKernel file_layout) {
  return with_kq_groups<IQ4XSGroup<true>, kR, kT, kR1>(file_layout);
}

}  // namespace th::cpu
