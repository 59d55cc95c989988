// Matrix products for quantized weights on the CPU, one kernel family per
// weight type, each in generic, AVX2 and AVX-512 (VNNI) variants picked at
// run time.
//
// A product y = W x runs in two steps, as in llama.cpp: the activations x are
// converted once per token to the kernel's activation format (8-bit blocks
// for the integer formats, so dot products run on integer SIMD), then `gemm`
// computes a tile of rows for every token. gemm reads each weight row once
// for all n_tokens tokens, so a batch costs far less than that many
// matrix-vector products.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"

namespace th::cpu {

enum class Isa { Generic, Avx2, Avx512 };
std::string_view isa_name(Isa isa);

/// @brief The ISAs this CPU can run, best last (Generic is always there).
const std::vector<Isa>& available_isas();
/// @brief Whether `isa` is in available_isas().
bool has_isa(Isa isa);
/// @brief Whether this CPU (and OS) runs AVX512-BF16 (vdpbf16ps), on top of Isa::Avx512.
bool has_avx512_bf16();
/// @brief Whether it also runs AVX512-VBMI (vpermi2b): the fp8 kernel's table decoding.
bool has_avx512_vbmi();
/// @brief Whether it also runs GFNI on zmm (vgf2p8affineqb) and VBMI: the K-quant groups' bit-field
/// unpacking (*_avx512gfni.cpp; every CPU with both: Ice Lake, Sapphire Rapids, Zen 4 and later).
bool has_avx512_gfni();
/// @brief The best ISA this CPU runs, or $TOKENHIVE_ISA (generic | avx2 | avx512) when set and available.
Isa best_isa();

/// How the few-token matmul tiles ask for the weight lines they stream once from memory,
/// kStreamPrefetchBytes ahead (tile_table.h's prefetch_stream): into L2 (`prefetcht1`), or
/// into L1 only (`prefetchnta`: the lines do not displace L2, nor go on to the L3 as L2's
/// victims). Which is faster depends on the core (tile_table.h gives the figures).
enum class StreamPrefetch { L2, Nta };
std::string_view stream_prefetch_name(StreamPrefetch p);  // "l2" or "nta"
/// @brief The choice for a CPU: Nta on AMD family 0x1A (Zen 5) and later, L2 elsewhere.
StreamPrefetch default_stream_prefetch(bool amd, unsigned family);
/// @brief `value` ("l2" or "nta") if given, else `fallback`; an unknown value gives fallback
/// and sets *error to one line naming it.
StreamPrefetch parse_stream_prefetch(const char* value, StreamPrefetch fallback, std::string* error);
/// @brief This process's choice, made once: $TOKENHIVE_STREAM_PREFETCH (l2 | nta) when set
/// (an unknown value is reported on stderr and ignored), else default_stream_prefetch for
/// this CPU.
StreamPrefetch stream_prefetch();
/// stream_prefetch() == StreamPrefetch::Nta, set before main (the tiles read it per line).
extern const bool g_stream_prefetch_nta;

struct MatmulKernel {
  DType weight = DType::F32;
  DType act = DType::F32;  // activation format: Q8_0, Q8_K or F32
  Isa isa = Isa::Generic;
  /// x (n f32) -> act format at dst (row_bytes(act, n) bytes).
  void (*convert_act)(const float* x, void* dst, int64_t n) = nullptr;
  /// y[t * y_stride + r] = dot(W row r, act row t) for r in [r0, r1), t < n_tokens.
  /// W rows are w_row_bytes apart; act rows act_row_bytes apart; cols is the row length.
  void (*gemm)(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
               size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) = nullptr;

  // Optional (all three or none): a kernel that rearranges the activations into its own
  // layout before the products lets the caller do that once per matmul, where gemm
  // redoes it on every call, i.e. for every chunk of rows a thread takes (at 32 tokens
  // of a 256 x 2048 Q4_0 matrix split in 8 chunks, a quarter of the instructions).
  /// Bytes of one token's prepared activations for rows of `cols`.
  size_t (*prepared_row_bytes)(int64_t cols) = nullptr;
  /// One token's act-format row (cols elements) -> its prepared form at dst.
  void (*prepare)(const uint8_t* act, int64_t cols, uint8_t* dst) = nullptr;
  /// gemm on prepared rows (act_row_bytes apart, at least prepared_row_bytes(cols)); the
  /// same results as gemm, bit for bit. Give it rows on 64-byte boundaries: any alignment
  /// works, but from 16 half the 32-byte loads straddle two cache lines (20% slower).
  void (*gemm_prepared)(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                        const uint8_t* act, size_t act_row_bytes, int64_t n_tokens, float* y,
                        int64_t y_stride) = nullptr;

  // Optional (both or none, and only with the prepare hooks): weights repacked once, at load
  // (CpuBackend::prepare_weight), into the layout the tiles want, so that no product
  // rearranges weight bytes again. A packed row has the file's row bytes, then padding to the
  // packed stride (packed_row_bytes: a multiple of packed_row_align).
  /// Rows [r0, r1) of W (cols elements, w_row_bytes apart) -> their packed form at out, rows
  /// out_row_bytes (>= w_row_bytes) apart.
  void (*pack_rows)(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, uint8_t* out,
                    size_t out_row_bytes) = nullptr;
  /// gemm_prepared on packed weights (w_row_bytes: their stride); the same results, bit for
  /// bit, except where a kernel runs other float steps on the same exact integer sums and says
  /// so (q4_K, q6_K, IQ4_XS on AVX-512: within the kquant tests' rounding bound,
  /// kquant_groups_avx512.h).
  void (*gemm_packed)(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                      const uint8_t* act, size_t act_row_bytes, int64_t n_tokens, float* y,
                      int64_t y_stride) = nullptr;
  /// The packed rows' alignment in bytes: 64 where the layout keeps its level images on whole
  /// cache lines (it then costs a row its padding), 1 where a row's bytes run on as in the file.
  int packed_row_align = 1;
};

/// @brief The stride of `k`'s packed rows of `row_bytes` file bytes (its packed_row_align's next multiple).
inline size_t packed_row_bytes(const MatmulKernel& k, size_t row_bytes) {
  const size_t a = static_cast<size_t>(k.packed_row_align);
  return (row_bytes + a - 1) / a * a;
}

/// @brief The kernel for weights of `weight` type at `isa`, or nullptr when there is none
/// (the backend then falls back to dequantize-and-dot).
const MatmulKernel* find_matmul_kernel(DType weight, Isa isa);

}  // namespace th::cpu
