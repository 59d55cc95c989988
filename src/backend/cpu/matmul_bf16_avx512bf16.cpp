// BF16 weights x BF16 activations with AVX512-BF16's vdpbf16ps (Cooper Lake, Sapphire
// Rapids, Zen 4): 32 weight-activation pairs per instruction, products exact in f32 (8 x
// 8 significand bits), summed into 16 f32 lanes. The activations are rounded to bf16 once
// per matmul (convert_act: round to nearest even, as f32_to_bf16, subnormals and NaN
// included), which adds at most 2^-8 sum |w x| to a product against f32 activations; that
// is bf16 arithmetic, what the bf16 compute type asks for, and halves the activation bytes
// the tiles stream. vdpbf16ps treats bf16 subnormals (below 2^-126) as zero. Registered
// for AVX-512 BF16 weights only on CPUs with the feature (matmul_kernels.cpp); elsewhere
// the f32-activation kernels of matmul_float*.cpp run.
//
// FP8_E4M3 weights (tensor/fp8.h) take the same bf16 activations where the CPU also has
// VBMI: a block of normal codes becomes one zmm of bf16 with its power-of-two scale folded
// into the exponent (decode_fp8_block_scaled: sign-extend, shift, mask, add), and one
// vdpbf16ps per token adds its products into the accumulator; blocks with zero or subnormal
// codes, or a scale below 2^-120, go through two 128-entry byte tables (vpermi2b: every E4M3
// value is a normal bf16) and one scale FMA per token.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/act_q8.h"
#include "backend/cpu/tile_table.h"
#include "tensor/fp8.h"

namespace th::cpu {

namespace {

constexpr int kPairs = 32;  // bf16 values per zmm
constexpr int kFetchAhead = 1024;  // bytes ahead in a row that the fp8 tiles prefetch

// x (n f32) -> n bf16 at dst, as f32_to_bf16: NaN -> its top half with the quiet bit set,
// else round to nearest even by adding 0x7fff + the kept part's lowest bit.
void convert_act_bf16_avx512(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  auto one = [](__m512i v) {
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(v, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(v, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(v, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(v, 16), _mm512_set1_epi32(64));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
  };
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), one(_mm512_loadu_si512(x + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm256_mask_storeu_epi16(out + i, m, one(_mm512_maskz_loadu_epi32(m, x + i)));
  }
}

using TileFn = void (*)(const uint8_t*, size_t, const uint8_t*, size_t, int64_t, float*, int64_t);

struct Bf16Tiles {
  // y[t * y_stride + r] = dot(W row r, x row t) for r < R, t < T.
  template <int R, int T>
  static void tile(const uint8_t* w, size_t w_row_bytes, const uint8_t* x, size_t x_row_bytes, int64_t cols,
                   float* y, int64_t y_stride) {
    __m512 acc[R][T];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    auto at = [](const uint8_t* row, int64_t c) { return reinterpret_cast<const uint16_t*>(row) + c; };
    const int64_t body = cols - cols % kPairs;
    for (int64_t c = 0; c < body; c += kPairs) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512bh wv = (__m512bh)_mm512_loadu_si512(at(w + r * w_row_bytes, c));
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t)
          acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, (__m512bh)_mm512_loadu_si512(at(x + t * x_row_bytes, c)));
      }
    }
    if (body < cols) {  // the last columns through zero-filling masked loads
      const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (cols - body)) - 1);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(m, at(w + r * w_row_bytes, body));
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t)
          acc[r][t] =
              _mm512_dpbf16_ps(acc[r][t], wv, (__m512bh)_mm512_maskz_loadu_epi16(m, at(x + t * x_row_bytes, body)));
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) y[t * y_stride + r] = _mm512_reduce_add_ps(acc[r][t]);
  }
};

// 4 x 4 tiles (16 accumulators); 4 rows at a time for one token, as the float family.
void gemm_bf16_dot(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                   size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  constexpr int kR = 4, kT = 4;
  static constexpr TileTable<TileFn, kR, kT, Bf16Tiles> table;
  run_tiles<kR, kT>(table, w, w_row_bytes, cols, r0, r1, act, act_row_bytes, n_tokens, y, y_stride);
}

// The low and high bytes of the bf16 of each E4M3 magnitude code 0..127 (exact: at most four
// significant bits), as the two halves of a 128-entry vpermi2b table each. Computed here
// from the codec rather than with half.h's inline f32_to_bf16, which must not be compiled
// in an AVX-512 file (the linker may keep this file's copy for every caller).
struct Fp8Tables {
  __m512i lo0, lo1, hi0, hi1;
  __m512i dup;       // byte j <- byte j / 2: each code into both bytes of its 16-bit lane
  float scale[256];  // 2^(e - 127) for e in [1, 246] (tensor/fp8.h), loaded by vbroadcastss
  // (e - 7) << 7 in both halves: what decode_fp8_block_scaled adds to a code's shifted bits to make
  // the bf16 of code x 2^(e - 127), the block's scale folded into the exponent (vpbroadcastd
  // from memory is a load alone, no shuffle); 0 where e < 7, whose products fall below bf16's
  // normal range and take the tables and an FMA instead.
  uint32_t bias[256];
};

const Fp8Tables& fp8_tables() {
  static const Fp8Tables t = [] {
    alignas(64) uint8_t lo[128], hi[128], dup[64];
    for (int c = 0; c < 128; ++c) {
      const float f = fp8_e4m3_to_f32(static_cast<uint8_t>(c));
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      lo[c] = static_cast<uint8_t>(bits >> 16);
      hi[c] = static_cast<uint8_t>(bits >> 24);
    }
    for (int j = 0; j < 64; ++j) dup[j] = static_cast<uint8_t>(j / 2);
    Fp8Tables r{_mm512_load_si512(lo), _mm512_load_si512(lo + 64), _mm512_load_si512(hi),
                _mm512_load_si512(hi + 64), _mm512_load_si512(dup), {}, {}};
    for (int e = 0; e < 256; ++e) {
      const uint32_t bits = static_cast<uint32_t>(std::clamp(e, kFp8MinScaleExp, kFp8MaxScaleExp)) << 23;
      std::memcpy(&r.scale[e], &bits, sizeof bits);
      r.bias[e] = e >= 7 && e <= kFp8MaxScaleExp ? static_cast<uint32_t>((e - 7) << 7) * 0x10001u : 0;
    }
    return r;
  }();
  return t;
}

// 32 codes -> 32 bf16 in element order, through the tables: any code.
inline __m512bh decode_fp8_block_table(const uint8_t* codes, const Fp8Tables& t) {
  const __m512i c = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes)));
  const __m512i both = _mm512_permutexvar_epi8(t.dup, c);  // each byte of lane i is code i
  const __m512i lo = _mm512_permutex2var_epi8(t.lo0, both, t.lo1);    // bit 7 (the sign) is ignored
  const __m512i hi = _mm512_permutex2var_epi8(t.hi0, both, t.hi1);
  const __m512i v = _mm512_mask_blend_epi8(static_cast<__mmask64>(0xaaaaaaaaaaaaaaaaull), lo, hi);
  // v | (both & 0x8000): the code's sign to bit 15.
  return (__m512bh)_mm512_ternarylogic_epi32(v, both, _mm512_set1_epi16(static_cast<short>(0x8000)), 0xf8);
}

// 32 codes of a block with scale exponent e -> 32 bf16 of code x 2^(e - 127), the scale folded
// into the exponent: a code s.eeee.mmm with eeee >= 1 is the bf16 s.(eeee + e - 7).mmm0000 (bias
// 127 against e4m3's 7 and the scale's 127, the mantissa's 3 bits on top of bf16's 7):
// sign-extend to 16 bits, shift left by 4, keep the sign and the 7 bits below it (0x87f0), add
// the block's bias. Four operations and no multiply: the products come out scaled, so
// vdpbf16ps adds them straight into the accumulator (the per-block scale FMA and its
// zeroed register go). Returns false, writing nothing, for a block with a code of exponent 0
// (zero and the subnormals, which this formula gets wrong; random weights: about one block
// in 500) or a scale below 2^-120 (products under bf16's normal range): the caller takes
// decode_fp8_block_table and the scale FMA. Against session 7's shift-and-add without the scale
// (micro_bench BM_Matmul/fp8_e4m3/avx512, one thread, old and new alternated 3 times, medians):
// 128 x 1024 in L2 11.7 -> 9.7 us, 5632 x 2048 from memory 2564 -> 2235 us, 128 tokens 860 -> 751 us.
inline bool decode_fp8_block_scaled(const uint8_t* blk, const Fp8Tables& t, __m512bh& out) {
  const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 1));
  const uint32_t* bias = t.bias + blk[0];
  if (__builtin_expect((_mm256_testn_epi8_mask(c, _mm256_set1_epi8(0x78)) != 0) | (*bias == 0), 0)) return false;
  const __m512i v =
      _mm512_and_si512(_mm512_slli_epi16(_mm512_cvtepi8_epi16(c), 4), _mm512_set1_epi16(static_cast<short>(0x87f0)));
  __m512i b;  // vpbroadcastd from memory: a load, where a broadcast from a register takes the shuffle port
  __asm__("vpbroadcastd %1, %0" : "=v"(b) : "m"(*bias));
  out = (__m512bh)_mm512_add_epi16(v, b);
  return true;
}

struct Fp8DotTiles {
  template <int R, int T>
  static void tile(const uint8_t* w, size_t w_row_bytes, const uint8_t* x, size_t x_row_bytes, int64_t cols,
                   float* y, int64_t y_stride) {
    const Fp8Tables& tables = fp8_tables();
    __m512 acc[R][T];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    const int64_t nb = cols / kFp8BlockElements;
    for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = w + r * w_row_bytes + b * kFp8BlockBytes;
        // Decoding takes about 8 instructions a block, so the out-of-order window holds few
        // blocks' loads and the weights stream at half bf16's rate from memory (micro_bench
        // t1, cold): fetch a row's bytes ~1 KiB ahead, once per 64 (every other block).
        if ((b & 1) == 0) _mm_prefetch(reinterpret_cast<const char*>(blk) + kFetchAhead, _MM_HINT_T0);
        auto xv = [&](int t) {
          return (__m512bh)_mm512_loadu_si512(x + t * x_row_bytes + b * kFp8BlockElements * 2);
        };
        __m512bh wv;
        if (__builtin_expect(decode_fp8_block_scaled(blk, tables, wv), 1)) {
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, xv(t));
        } else {
          wv = decode_fp8_block_table(blk + 1, tables);
          const __m512 s = _mm512_set1_ps(tables.scale[blk[0]]);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t)
            acc[r][t] = _mm512_fmadd_ps(_mm512_dpbf16_ps(_mm512_setzero_ps(), wv, xv(t)), s, acc[r][t]);
        }
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) y[t * y_stride + r] = _mm512_reduce_add_ps(acc[r][t]);
  }
};

void gemm_fp8_dot(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                  size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  constexpr int kR = 4, kT = 4;
  static constexpr TileTable<TileFn, kR, kT, Fp8DotTiles> table;
  run_tiles<kR, kT>(table, w, w_row_bytes, cols, r0, r1, act, act_row_bytes, n_tokens, y, y_stride);
}

}  // namespace

extern constinit const MatmulKernel kMatmulFp8Avx512Dot = {DType::FP8_E4M3, DType::BF16, Isa::Avx512,
                                                           convert_act_bf16_avx512, gemm_fp8_dot};

extern constinit const MatmulKernel kMatmulBF16Avx512Dot = {DType::BF16, DType::BF16, Isa::Avx512,
                                                            convert_act_bf16_avx512, gemm_bf16_dot};

}  // namespace th::cpu
