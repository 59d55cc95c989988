// Q4_0 weights x Q8_0 activations, AVX-512 VNNI: the group driver
// (act_q8_groups.h) on 8-block zmm groups (Group8) of the VNNI trait in matmul_q4_0_group.h.
#include "backend/cpu/matmul_q4_0_group.h"

namespace th::cpu {

extern constinit const MatmulKernel kMatmulQ4_0Avx512 =
    group_kernel<Group8<Q4_0Group<true>>, 4, 4, 1>(DType::Q4_0, Isa::Avx512, convert_act_q8_0_avx512);

}  // namespace th::cpu
