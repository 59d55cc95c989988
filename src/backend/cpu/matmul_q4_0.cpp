// Q4_0 weights x Q8_0 activations, plain C++: the reference the SIMD
// variants are measured against, and what a CPU without AVX2 runs.
//
// Per 32-element block the product sum (q - 8) * x is exact in int32, then
// scaled by d_w * d_x and summed in f32, as ggml_vec_dot_q4_0_q8_0 does. Each
// weight row is read once per tile of kTokens tokens, whose activations stay
// in L1 across rows.
#include <algorithm>

#include "backend/cpu/act_q8.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

constexpr int kTokens = 4;

void gemm_q4_0_generic(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                       const uint8_t* act, size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  const int64_t nb = cols / kQK;
  const float* f16 = f16_table();
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokens) {
    const int nt = static_cast<int>(std::min<int64_t>(kTokens, n_tokens - t0));
    const BlockQ8_0* x[kTokens];
    for (int t = 0; t < nt; ++t) x[t] = reinterpret_cast<const BlockQ8_0*>(act + (t0 + t) * act_row_bytes);
    for (int64_t r = r0; r < r1; ++r) {
      const auto* wr = reinterpret_cast<const BlockQ4_0*>(w + r * w_row_bytes);
      float acc[kTokens] = {};
      for (int64_t b = 0; b < nb; ++b) {
        // Element i in the low nibble of byte i, element i + 16 in the high one.
        int8_t q[kQK];
        for (int i = 0; i < kQK / 2; ++i) {
          q[i] = static_cast<int8_t>((wr[b].qs[i] & 0xF) - 8);
          q[i + kQK / 2] = static_cast<int8_t>((wr[b].qs[i] >> 4) - 8);
        }
        const float dw = f16[wr[b].d];
        for (int t = 0; t < nt; ++t) {
          int32_t sum = 0;
          for (int i = 0; i < kQK; ++i) sum += q[i] * x[t][b].qs[i];
          acc[t] += dw * f16[x[t][b].d] * static_cast<float>(sum);
        }
      }
      for (int t = 0; t < nt; ++t) y[(t0 + t) * y_stride + r] = acc[t];
    }
  }
}

}  // namespace

extern constinit const MatmulKernel kMatmulQ4_0Generic = {DType::Q4_0, DType::Q8_0, Isa::Generic,
                                                          convert_act_q8_0_generic, gemm_q4_0_generic};

}  // namespace th::cpu
