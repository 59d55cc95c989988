// q6_K weights x Q8_K activations with AVX-512 VNNI: the row unpacking and the one-token
// path are the AVX2 ones (decode is bound by memory bandwidth, which wider vectors do
// not raise); the multiply core for more tokens is act_q8k_avx512.cpp's.
#include "backend/cpu/act_q8k.h"
#include "backend/cpu/matmul_kernels.h"

namespace th::cpu {

namespace {

void gemm(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
          size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  if (n_tokens == 1) return gemv_q6_k_avx2(w, w_row_bytes, cols, r0, r1, act, y);
  gemm_via_panels<PanelK6>(unpack_q6_k_avx2, panel_gemm_k6_avx512, w, w_row_bytes, cols, r0, r1, act,
                           act_row_bytes, n_tokens, y, y_stride);
}

}  // namespace

MatmulKernel matmul_q6_k_avx512() {
  return {DType::Q6_K, DType::Q8_K, Isa::Avx512, quantize_row_q8_k_avx2, gemm};
}

}  // namespace th::cpu
