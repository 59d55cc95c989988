// A table of a register-tiled kernel's instantiations for every tile size up to
// kR x kT, so that a driver runs its edge tiles (the last rows of a chunk, the
// last tokens of a batch) through the same code as the full ones: the kernels'
// loops are unrolled over R and T at compile time, and the table picks the
// instantiation at run time.
//
// No SIMD code here, but the tiles it points to are: include it only from the
// drivers that *_avx2.cpp / *_avx512.cpp files include. Everything is in an
// unnamed namespace, as in those drivers.
#pragma once

#include <cstdint>

namespace th::cpu {
namespace {

/// fn[r - 1][t - 1] = &Tiles::template tile<r, t>, for r <= kR, t <= kT; Fn is the
/// function-pointer type every tile<R, T> has.
template <class Fn, int kR, int kT, class Tiles>
struct TileTable {
  Fn fn[kR][kT];
  constexpr TileTable() : fn() { fill<0>(); }
  template <int I>
  constexpr void fill() {
    if constexpr (I < kR * kT) {
      fn[I / kT][I % kT] = &Tiles::template tile<I / kT + 1, I % kT + 1>;
      fill<I + 1>();
    }
  }
};

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

}  // namespace
}  // namespace th::cpu
