// The FP8_E4M3 weights x f32 activations driver shared by matmul_fp8_avx2.cpp and
// matmul_fp8_avx512.cpp (include it from those files only: everything is in an unnamed
// namespace, as in matmul_float_driver.h).
//
// Decoding in registers, no table: an e4m3 code s.eeee.mmm moved to bits 15 and 13..7 of
// a 16-bit lane is the f16 s.0eeee.mmm0000000, whose value is the code's times 2^-8 for
// normals (f16's exponent bias is 15, e4m3's 7) and for subnormals alike (both formats'
// subnormals are m times their smallest step, 2^-9 and 2^-17). The F16C conversion then
// gives f32, and the block's scale 2^(e - 127) times 2^8 (a normal f32 for e <= 246,
// tensor/fp8.h) is one multiply per vector, shared by every token of the tile. Per 16
// codes on AVX-512: load, vpmovsxbw, shift, and, vcvtph2ps, mul, then the FMAs.
//
// An ISA supplies a trait V:
//   Vec, kLanes, kR, kT, kR1     the f32 vector and width; tiles of kR rows x kT tokens,
//                                kR1 rows for one token
//   zero(), fmadd(a, b, c), mul(a, b), set1(f), hsum(v), f32(p)
//   fp8(p)                       kLanes codes at p decoded to f32, times 2^-8
#pragma once

#include <cstdint>
#include <cstring>

#include "backend/cpu/act_q8.h"
#include "backend/cpu/tile_table.h"
#include "tensor/fp8.h"

namespace th::cpu {
namespace {

// 2^(e - 119): the block scale 2^(e - 127) times the 2^8 the decoding leaves out.
inline float fp8_block_factor(uint8_t e) {
  const uint32_t bits = static_cast<uint32_t>(e + 8) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

using Fp8TileFn = void (*)(const uint8_t*, size_t, const uint8_t*, size_t, int64_t, float*, int64_t);

template <class V>
struct Fp8Tiles {
  static constexpr int kPerBlock = kFp8BlockElements / V::kLanes;
  // y[t * y_stride + r] = dot(W row r, x row t) for r < R, t < T; cols a multiple of 32.
  template <int R, int T>
  static void tile(const uint8_t* w, size_t w_row_bytes, const uint8_t* x, size_t x_row_bytes, int64_t cols,
                   float* y, int64_t y_stride) {
    typename V::Vec acc[R][T];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[r][t] = V::zero();
    const int64_t nb = cols / kFp8BlockElements;
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t c0 = b * kFp8BlockElements;
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = w + r * w_row_bytes + b * kFp8BlockBytes;
        const auto s = V::set1(fp8_block_factor(blk[0]));
#pragma GCC unroll 4
        for (int j = 0; j < kPerBlock; ++j) {
          const auto wv = V::mul(V::fp8(blk + 1 + j * V::kLanes), s);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t)
            acc[r][t] = V::fmadd(wv, V::f32(reinterpret_cast<const float*>(x + t * x_row_bytes) + c0 + j * V::kLanes),
                                 acc[r][t]);
        }
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) y[t * y_stride + r] = V::hsum(acc[r][t]);
  }
};

template <class V>
void gemm_fp8(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
              size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  using Tiles = Fp8Tiles<V>;
  if (n_tokens == 1) {
    static constexpr TileTable<Fp8TileFn, V::kR1, 1, Tiles> table;
    for (int64_t r = r0; r < r1; r += V::kR1) {
      const int nr = static_cast<int>(min64(V::kR1, r1 - r));
      table.fn[nr - 1][0](w + r * w_row_bytes, w_row_bytes, act, act_row_bytes, cols, y + r, y_stride);
    }
    return;
  }
  static constexpr TileTable<Fp8TileFn, V::kR, V::kT, Tiles> table;
  for (int64_t r = r0; r < r1; r += V::kR) {
    const int nr = static_cast<int>(min64(V::kR, r1 - r));
    for (int64_t t0 = 0; t0 < n_tokens; t0 += V::kT) {
      const int nt = static_cast<int>(min64(V::kT, n_tokens - t0));
      table.fn[nr - 1][nt - 1](w + r * w_row_bytes, w_row_bytes, act + t0 * act_row_bytes, act_row_bytes, cols,
                               y + t0 * y_stride + r, y_stride);
    }
  }
}

template <class V>
constexpr MatmulKernel fp8_kernel(Isa isa) {
  return {DType::FP8_E4M3, DType::F32, isa, convert_act_f32, gemm_fp8<V>};
}

}  // namespace
}  // namespace th::cpu
