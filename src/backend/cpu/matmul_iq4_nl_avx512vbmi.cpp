// IQ4_NL weights x Q8_0 activations, AVX-512 VNNI + VBMI: matmul_iq4_nl_avx512.cpp's groups
// with the packed weights' level lookups done by vpermb (matmul_iq4_nl_group.h, kVbmi), for
// CPUs with VBMI (has_avx512_vbmi(): Ice Lake, Sapphire Rapids, Zen 4 and later).
#include "backend/cpu/matmul_iq4_nl_group.h"

namespace th::cpu {

extern constinit const MatmulKernel kMatmulIQ4_NLAvx512Vbmi =
    group_kernel<Group8<IQ4_NLGroup<true, true>>, 4, 4, 1>(DType::IQ4_NL, Isa::Avx512, convert_act_q8_0_avx512);

}  // namespace th::cpu
