// FP8_E4M3 weights (tensor/fp8.h: blocks of 32 codes with a power-of-two scale) x f32
// activations, plain C++: the reference the SIMD variants (matmul_fp8_driver.h) are
// measured against. Each block is decoded through a 256-entry table, scaled (exactly: a
// power of two) into an L1 chunk and dotted with each token of the tile, eight partial
// sums per dot as the float family's generic kernel keeps.
#include <algorithm>
#include <array>
#include <cmath>

#include "backend/cpu/act_q8.h"
#include "tensor/fp8.h"

namespace th::cpu {

namespace {

constexpr int kTokens = 4;
constexpr int kLanes = 8;

const std::array<float, 256>& fp8_table() {
  static const std::array<float, 256> t = [] {
    std::array<float, 256> v{};
    for (int c = 0; c < 256; ++c) v[static_cast<size_t>(c)] = fp8_e4m3_to_f32(static_cast<uint8_t>(c));
    return v;
  }();
  return t;
}

void gemm_fp8_generic(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                      const uint8_t* act, size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  const std::array<float, 256>& dec = fp8_table();
  const int64_t nb = cols / kFp8BlockElements;
  alignas(64) float wc[kFp8BlockElements];
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokens) {
    const int nt = static_cast<int>(std::min<int64_t>(kTokens, n_tokens - t0));
    const float* x[kTokens];
    for (int t = 0; t < nt; ++t) x[t] = reinterpret_cast<const float*>(act + (t0 + t) * act_row_bytes);
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* wr = w + r * w_row_bytes;
      float acc[kTokens][kLanes] = {};
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = wr + b * kFp8BlockBytes;
        const float s = std::ldexp(1.0f, blk[0] - 127);
        for (int i = 0; i < kFp8BlockElements; ++i) wc[i] = dec[blk[1 + i]] * s;
        for (int t = 0; t < nt; ++t) {
          const float* xt = x[t] + b * kFp8BlockElements;
          for (int c = 0; c < kFp8BlockElements; c += kLanes)
            for (int l = 0; l < kLanes; ++l) acc[t][l] += wc[c + l] * xt[c + l];
        }
      }
      for (int t = 0; t < nt; ++t) {
        float s = 0;
        for (int l = 0; l < kLanes; ++l) s += acc[t][l];
        y[(t0 + t) * y_stride + r] = s;
      }
    }
  }
}

}  // namespace

extern constinit const MatmulKernel kMatmulFp8Generic = {DType::FP8_E4M3, DType::F32, Isa::Generic, convert_act_f32,
                                                         gemm_fp8_generic};

}  // namespace th::cpu
