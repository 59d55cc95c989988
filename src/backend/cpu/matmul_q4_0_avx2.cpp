// Q4_0 weights x Q8_0 activations, AVX2: the trait in matmul_q4_0_group.h, the
// driver and the why of 4-block groups in act_q8_groups.h.
#include "backend/cpu/matmul_q4_0_group.h"

namespace th::cpu {

extern constinit const MatmulKernel kMatmulQ4_0Avx2 =
    group_kernel<Q4_0Group<false>, 1, 8, 1>(DType::Q4_0, Isa::Avx2, convert_act_q8_0_avx2);

}  // namespace th::cpu
