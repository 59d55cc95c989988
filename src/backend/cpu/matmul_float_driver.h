// The F32, F16 and BF16 weights x f32 activations driver shared by
// matmul_float_avx2.cpp and matmul_float_avx512.cpp. Include it from those
// files only: everything is in an unnamed namespace, so no SIMD code can stand
// in for a baseline function of the same name at link time.
//
// A weight vector is widened to f32 once (vcvtph2ps for f16; for bf16 a
// zero-extend and a 16-bit shift, as bf16 is the top half of an f32) and
// multiplied into T tokens' accumulators, the activations coming straight from
// memory as the FMA's operand. Columns past the last whole vector go through
// one partial load: masked where the ISA has masks (V::kMasked), else from a
// zero-padded copy.
//
// An ISA supplies a trait V:
//   Vec, kLanes, kMasked         the f32 vector, its width, whether loads take a count
//   kR, kT, kR1                  tiles of kR rows x kT tokens; kR1 rows for one token
//   zero(), fmadd(a, b, c), hsum(v)
//   f32(p), f16(p), bf16(p)      kLanes values from p widened to f32 (with kMasked: the
//                                first n, zero after, from f32(p, n), ...)
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cpu/act_q8.h"
#include "backend/cpu/tile_table.h"

namespace th::cpu {
namespace {

template <DType kType>
using FloatElem = std::conditional_t<kType == DType::F32, float, uint16_t>;

// kLanes weights of kType at p as f32; with n, the first n (< kLanes) and zeros.
template <class V, DType kType, class... N>
typename V::Vec load_w(const FloatElem<kType>* p, N... n) {
  if constexpr (kType == DType::F32)
    return V::f32(p, n...);
  else if constexpr (kType == DType::F16)
    return V::f16(p, n...);
  else
    return V::bf16(p, n...);
}

// The first n (< kLanes) values of a row as a whole vector, zeros after.
template <class V, DType kType>
typename V::Vec load_part(const FloatElem<kType>* p, int n) {
  if constexpr (V::kMasked) {
    return load_w<V, kType>(p, n);
  } else {
    alignas(64) FloatElem<kType> pad[V::kLanes] = {};
    std::memcpy(pad, p, n * sizeof(pad[0]));
    return load_w<V, kType>(pad);
  }
}

using FloatTileFn = void (*)(const uint8_t*, size_t, const uint8_t*, size_t, int64_t, float*, int64_t);

template <class V, DType kType>
struct FloatTiles {
  using E = FloatElem<kType>;
  // y[t * y_stride + r] = dot(W row r, x row t) for r < R, t < T.
  template <int R, int T>
  static void tile(const uint8_t* w, size_t w_row_bytes, const uint8_t* x, size_t x_row_bytes, int64_t cols,
                   float* y, int64_t y_stride) {
    typename V::Vec acc[R][T];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[r][t] = V::zero();
    const int64_t body = cols - cols % V::kLanes;
    for (int64_t c = 0; c < body; c += V::kLanes) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const auto wv = load_w<V, kType>(reinterpret_cast<const E*>(w + r * w_row_bytes) + c);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t)
          acc[r][t] = V::fmadd(wv, V::f32(reinterpret_cast<const float*>(x + t * x_row_bytes) + c), acc[r][t]);
      }
    }
    if (body < cols) {
      const int n = static_cast<int>(cols - body);
      // Unrolled like the body: a loop here would index acc at run time and keep it in
      // memory, a store per FMA in the body too (AVX-512 4 x 4 at 32 tokens: 40% slower).
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const auto wv = load_part<V, kType>(reinterpret_cast<const E*>(w + r * w_row_bytes) + body, n);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const float* xt = reinterpret_cast<const float*>(x + t * x_row_bytes) + body;
          acc[r][t] = V::fmadd(wv, load_part<V, DType::F32>(xt, n), acc[r][t]);
        }
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) y[t * y_stride + r] = V::hsum(acc[r][t]);
  }
};

// kR x kT tiles for several tokens; kR1 rows at a time for one token (streaming).
template <class V, DType kType, int kR, int kT, int kR1>
void gemm_float(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  using Tiles = FloatTiles<V, kType>;
  if (n_tokens == 1) {
    static constexpr TileTable<FloatTileFn, kR1, 1, Tiles> table;
    for (int64_t r = r0; r < r1; r += kR1) {
      const int nr = static_cast<int>(min64(kR1, r1 - r));
      table.fn[nr - 1][0](w + r * w_row_bytes, w_row_bytes, act, act_row_bytes, cols, y + r, y_stride);
    }
    return;
  }
  static constexpr TileTable<FloatTileFn, kR, kT, Tiles> table;
  run_tiles<kR, kT>(table, w, w_row_bytes, cols, r0, r1, act, act_row_bytes, n_tokens, y, y_stride);
}

// The kernel object of weights of kType on V's ISA.
template <class V, DType kType>
constexpr MatmulKernel float_kernel(Isa isa) {
  return {kType, DType::F32, isa, convert_act_f32, gemm_float<V, kType, V::kR, V::kT, V::kR1>};
}

}  // namespace
}  // namespace th::cpu
