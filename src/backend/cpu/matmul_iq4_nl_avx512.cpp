// IQ4_NL weights x Q8_0 activations, AVX-512 VNNI: the AVX2 driver and layout
// (act_q8_groups.h) with vpdpbusd for the products (matmul_iq4_nl_group.h).
#include "backend/cpu/matmul_iq4_nl_group.h"

namespace th::cpu {

extern constinit const MatmulKernel kMatmulIQ4_NLAvx512 =
    group_kernel<IQ4_NLGroup<true>, 1, 8, 1>(DType::IQ4_NL, Isa::Avx512, convert_act_q8_0_avx512);

}  // namespace th::cpu
