// IQ4_NL weights x Q8_0 activations, AVX-512 VNNI: the group driver
// (act_q8_groups.h) on 8-block zmm groups (Group8) of the VNNI trait in matmul_iq4_nl_group.h.
#include "backend/cpu/matmul_iq4_nl_group.h"

namespace th::cpu {

extern constinit const MatmulKernel kMatmulIQ4_NLAvx512 =
    group_kernel<Group8<IQ4_NLGroup<true>>, 4, 4, 1>(DType::IQ4_NL, Isa::Avx512, convert_act_q8_0_avx512);

}  // namespace th::cpu
