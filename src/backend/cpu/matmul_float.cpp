// F32, F16 and BF16 weights x f32 activations, plain C++: the reference the
// SIMD variants are measured against, and what a CPU without AVX2 runs.
//
// A row is converted to f32 a chunk of kChunk columns at a time (1 KiB, in
// L1) and the chunk is dotted with each token of the tile, so a weight is
// converted once per kTokens tokens. Eight partial sums per dot, as eight
// SIMD lanes would keep, so the compiler may vectorize it and the rounding
// matches the SIMD variants' order more closely.
#include <algorithm>
#include <cstring>

#include "backend/cpu/act_q8.h"
#include "tensor/half.h"

namespace th::cpu {

namespace {

constexpr int kTokens = 4;
constexpr int kChunk = 256;
constexpr int kLanes = 8;

void load_chunk(const float* src, float* dst, int n) { std::memcpy(dst, src, n * sizeof(float)); }
// f16 through the table: th::f16_to_f32's branches for subnormals and nan cost 2x (1.2 GB/s
// against 2.6 with the table on one core, 2048 x 2048 from cache).
void load_chunk_f16(const uint16_t* src, float* dst, int n, const float* f16) {
  for (int i = 0; i < n; ++i) dst[i] = f16[src[i]];
}
void load_chunk_bf16(const uint16_t* src, float* dst, int n) {
  for (int i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

template <DType kType>
void gemm_float_generic(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                        const uint8_t* act, size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  alignas(64) float wc[kChunk];
  const float* f16 = f16_table();
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokens) {
    const int nt = static_cast<int>(std::min<int64_t>(kTokens, n_tokens - t0));
    const float* x[kTokens];
    for (int t = 0; t < nt; ++t) x[t] = reinterpret_cast<const float*>(act + (t0 + t) * act_row_bytes);
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* wr = w + r * w_row_bytes;
      float acc[kTokens][kLanes] = {};
      for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
        const int n = static_cast<int>(std::min<int64_t>(kChunk, cols - c0));
        if constexpr (kType == DType::F32) {
          load_chunk(reinterpret_cast<const float*>(wr) + c0, wc, n);
        } else if constexpr (kType == DType::F16) {
          load_chunk_f16(reinterpret_cast<const uint16_t*>(wr) + c0, wc, n, f16);
        } else {
          load_chunk_bf16(reinterpret_cast<const uint16_t*>(wr) + c0, wc, n);
        }
        for (int t = 0; t < nt; ++t) {
          const float* xt = x[t] + c0;
          int c = 0;
          for (; c + kLanes <= n; c += kLanes)
            for (int l = 0; l < kLanes; ++l) acc[t][l] += wc[c + l] * xt[c + l];
          for (; c < n; ++c) acc[t][c % kLanes] += wc[c] * xt[c];
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

extern constinit const MatmulKernel kMatmulF32Generic = {DType::F32, DType::F32, Isa::Generic, convert_act_f32,
                                                         gemm_float_generic<DType::F32>};
extern constinit const MatmulKernel kMatmulF16Generic = {DType::F16, DType::F32, Isa::Generic, convert_act_f32,
                                                         gemm_float_generic<DType::F16>};
extern constinit const MatmulKernel kMatmulBF16Generic = {DType::BF16, DType::F32, Isa::Generic, convert_act_f32,
                                                          gemm_float_generic<DType::BF16>};

}  // namespace th::cpu
