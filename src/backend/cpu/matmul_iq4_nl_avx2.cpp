// IQ4_NL weights x Q8_0 activations, AVX2: the trait in matmul_iq4_nl_group.h, the
// driver and the why of 4-block groups in act_q8_groups.h.
#include "backend/cpu/matmul_iq4_nl_group.h"

namespace th::cpu {

extern constinit const MatmulKernel kMatmulIQ4_NLAvx2 =
    group_kernel<IQ4_NLGroup<false>, 1, 8, 1>(DType::IQ4_NL, Isa::Avx2, convert_act_q8_0_avx2);

}  // namespace th::cpu
