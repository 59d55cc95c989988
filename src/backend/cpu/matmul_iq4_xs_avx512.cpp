// IQ4_XS weights x Q8_K activations, AVX-512 VNNI on 256-bit registers: the AVX2 tile
// with vpdpwssd for the scale multiply and add (matmul_iq4_xs_tile.h).
#include "backend/cpu/matmul_iq4_xs_tile.h"

namespace th::cpu {

void gemm_iq4_xs_avx512(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                        const uint8_t* act, size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  gemm_iq4_xs<true>(w, w_row_bytes, cols, r0, r1, act, act_row_bytes, n_tokens, y, y_stride);
}

}  // namespace th::cpu
