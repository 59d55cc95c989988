// Q8_K activations and the unpacked weight panels the K-quant kernels (q2_K, q3_K,
// q4_K, q5_K, q6_K) multiply them with.
//
// Every K-quant product runs against activations quantized to Q8_K (ggml's
// block_q8_K: per 256 values a float scale, 256 int8, and the sums of each 16),
// so the weight side can stay in integers: the per-sub-block offsets (q4_K/q5_K
// mins, q6_K's -32) become one multiply with the activation block sums.
//
// For more than one token, a weight row is first unpacked once into a panel
// (one byte per weight, scales widened to int16 the way the SIMD multiply wants
// them) and the panel is then reused for every token of the batch: llama.cpp
// re-unpacks each super-block for every token, which for q6_K costs about as
// much as the multiply itself. The three formats unpack to two panel layouts
// and share the multiply cores below.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/quant_blocks.h"

namespace th::cpu {

struct MatmulKernel;

// ---------------------------------------------------------------- Q8_K

/// @brief x (n f32, n a multiple of 256) -> n / 256 BlockQ8_K at dst, byte for byte as
/// ggml's quantize_row_q8_K_ref: d = max / -127 of the value of largest magnitude (the
/// first one on ties), qs = round-half-even(x / d), bsums the sums of each 16 qs. Where
/// ggml asserts or leaves bytes unwritten, this is defined instead: NaNs are ignored for
/// the scale and quantize to 0, levels past int8 (a denormal maximum) saturate, and a block
/// of zeros (or NaNs) is all zero bytes. dst needs no alignment.
void quantize_row_q8_k_ref(const float* x, void* dst, int64_t n);
/// @brief The same bytes as quantize_row_q8_k_ref, with AVX2; only where the CPU has AVX2.
void quantize_row_q8_k_avx2(const float* x, void* dst, int64_t n);
/// @brief The same bytes with AVX-512 (BW, VNNI); only where the CPU has Isa::Avx512.
void quantize_row_q8_k_avx512(const float* x, void* dst, int64_t n);
/// @brief n / 256 BlockQ8_K -> n f32 (d * qs).
void dequantize_row_q8_k(const void* src, float* dst, int64_t n);

// ---------------------------------------------------------------- panels

/// One q4_K or q5_K super-block of one row, unpacked: the block dequantizes to
/// d * sc[j] * q[e] + mins[j] for e in sub-block j = e / 32.
struct alignas(32) PanelK4 {
  uint8_t q[256];      // levels 0..15 (q4_K) or 0..31 (q5_K), in element order
  int16_t sc[8][2];    // sub-block scale 0..63, twice: one dword is a madd operand for a whole chunk
  float mins[8];       // -dmin * m[j]
  float d;
};

/// One q6_K super-block of one row, unpacked: dequantizes to d * s[e / 16] * (q[e] - 32).
/// q3_K unpacks to it too, with levels 0..7 and m32 = 4 * s (its offset is -4).
struct alignas(32) PanelK6 {
  uint8_t q[256];       // levels 0..63, in element order
  int16_t sc[8][16];    // per 32-element chunk k: s[2k] eight times, then s[2k+1] eight times
  int16_t m32[16];      // 32 * s[g]: the -32 offset, folded with the activation sums
  float d;
};

/// One q2_K super-block of one row, unpacked: dequantizes to d * s[e / 16] * q[e] - dmin * m[e / 16].
/// The layout of PanelK6 (the same cores run it) plus dmin; mins holds m, folded with the
/// activation sums like PanelK6's m32 but scaled by dmin instead of d.
struct alignas(32) PanelK2 {
  uint8_t q[256];       // levels 0..3, in element order
  int16_t sc[8][16];    // as PanelK6::sc, scales 0..15
  int16_t mins[16];     // m[g], 0..15
  float d;
  float dmin;
};

/// @brief Decodes a q4_K/q5_K super-block's 12 packed scale bytes (six bits each: eight
/// scales, eight mins) and its d, dmin into p.sc, p.mins and p.d.
void unpack_k4_scales(const uint8_t* scales12, float d, float dmin, PanelK4& p);

/// @brief A thread's scratch of at least `bytes` bytes, 64-byte aligned, reused across calls
/// (slot 0: the panel of the calling family, slot 1: the multiply core's own).
void* q8k_scratch(int slot, size_t bytes);

/// @brief The multiply cores: y[t * y_stride + r] = dot(panel row r, act row t) for r < rows,
/// t < n_tokens, where panel row r is panel[r * nb .. r * nb + nb) and act row t is nb
/// BlockQ8_K at act + t * act_row_bytes (no alignment needed).
void panel_gemm_k4_generic(const PanelK4* panel, int64_t rows, int64_t nb, const uint8_t* act,
                           size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride);
void panel_gemm_k6_generic(const PanelK6* panel, int64_t rows, int64_t nb, const uint8_t* act,
                           size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride);
void panel_gemm_k2_generic(const PanelK2* panel, int64_t rows, int64_t nb, const uint8_t* act,
                           size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride);
void panel_gemm_k2_avx2(const PanelK2* panel, int64_t rows, int64_t nb, const uint8_t* act, size_t act_row_bytes,
                        int64_t n_tokens, float* y, int64_t y_stride);
void panel_gemm_k2_avx512(const PanelK2* panel, int64_t rows, int64_t nb, const uint8_t* act,
                          size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride);
void panel_gemm_k4_avx2(const PanelK4* panel, int64_t rows, int64_t nb, const uint8_t* act, size_t act_row_bytes,
                        int64_t n_tokens, float* y, int64_t y_stride);
void panel_gemm_k6_avx2(const PanelK6* panel, int64_t rows, int64_t nb, const uint8_t* act, size_t act_row_bytes,
                        int64_t n_tokens, float* y, int64_t y_stride);
void panel_gemm_k4_avx512(const PanelK4* panel, int64_t rows, int64_t nb, const uint8_t* act,
                          size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride);
void panel_gemm_k6_avx512(const PanelK6* panel, int64_t rows, int64_t nb, const uint8_t* act,
                          size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride);

/// @brief A whole gemm (MatmulKernel::gemm semantics) for a K-quant family: unpacks the rows
/// [r0, r1) kPanelRows at a time with `unpack` (row bytes -> nb panel blocks) and runs `core`
/// on each panel for all n_tokens tokens, so every weight is unpacked once per call.
template <class Panel>
void gemm_via_panels(void (*unpack)(const uint8_t* row, int64_t nb, Panel* out),
                     void (*core)(const Panel* panel, int64_t rows, int64_t nb, const uint8_t* act,
                                  size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride),
                     const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                     size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride);
extern template void gemm_via_panels<PanelK4>(void (*)(const uint8_t*, int64_t, PanelK4*),
                                              void (*)(const PanelK4*, int64_t, int64_t, const uint8_t*, size_t,
                                                       int64_t, float*, int64_t),
                                              const uint8_t*, size_t, int64_t, int64_t, int64_t, const uint8_t*,
                                              size_t, int64_t, float*, int64_t);
extern template void gemm_via_panels<PanelK2>(void (*)(const uint8_t*, int64_t, PanelK2*),
                                              void (*)(const PanelK2*, int64_t, int64_t, const uint8_t*, size_t,
                                                       int64_t, float*, int64_t),
                                              const uint8_t*, size_t, int64_t, int64_t, int64_t, const uint8_t*,
                                              size_t, int64_t, float*, int64_t);
extern template void gemm_via_panels<PanelK6>(void (*)(const uint8_t*, int64_t, PanelK6*),
                                              void (*)(const PanelK6*, int64_t, int64_t, const uint8_t*, size_t,
                                                       int64_t, float*, int64_t),
                                              const uint8_t*, size_t, int64_t, int64_t, int64_t, const uint8_t*,
                                              size_t, int64_t, float*, int64_t);

/// The pieces a K-quant family's gemm is made of, per ISA.
using GemvKFn = void (*)(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                         const uint8_t* act, float* y);
template <class Panel>
using UnpackKFn = void (*)(const uint8_t* row, int64_t nb, Panel* out);
template <class Panel>
using PanelCoreFn = void (*)(const Panel* panel, int64_t rows, int64_t nb, const uint8_t* act, size_t act_row_bytes,
                             int64_t n_tokens, float* y, int64_t y_stride);

/// @brief A K-quant family's gemm (MatmulKernel::gemm semantics) from its pieces: one token
/// through kGemv where there is one (the SIMD variants stream each row once, no panel), more
/// tokens through gemm_via_panels with kUnpack and kCore. Instantiated in the families'
/// baseline files (matmul_q4_k.cpp, ...): it only calls the pieces, so the ISA code stays in
/// the *_avx2.cpp / *_avx512.cpp files that define them.
template <class Panel, GemvKFn kGemv, UnpackKFn<Panel> kUnpack, PanelCoreFn<Panel> kCore>
void gemm_kquant(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                 size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  // A plain `if`: GCC does not take a function pointer's comparison with null as a constant
  // expression under -fsanitize (the ASan build); optimized builds fold it all the same.
  if (kGemv != nullptr && n_tokens == 1) return kGemv(w, w_row_bytes, cols, r0, r1, act, y);
  gemm_via_panels<Panel>(kUnpack, kCore, w, w_row_bytes, cols, r0, r1, act, act_row_bytes, n_tokens, y, y_stride);
}

/// The AVX2 pieces of each family, which its AVX-512 variant reuses: the row unpackers, and
/// the one-token path (y[r] = dot(row r, act row 0) for r in [r0, r1)), which is bound by
/// memory bandwidth, not by vector width (the AVX-512 variants differ in the core alone).
void unpack_q4_k_avx2(const uint8_t* row, int64_t nb, PanelK4* out);
void unpack_q5_k_avx2(const uint8_t* row, int64_t nb, PanelK4* out);
void unpack_q6_k_avx2(const uint8_t* row, int64_t nb, PanelK6* out);
void unpack_q2_k_avx2(const uint8_t* row, int64_t nb, PanelK2* out);
void unpack_q3_k_avx2(const uint8_t* row, int64_t nb, PanelK6* out);
void gemv_q2_k_avx2(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                    float* y);
void gemv_q3_k_avx2(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                    float* y);
void gemv_q4_k_avx2(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                    float* y);
void gemv_q5_k_avx2(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                    float* y);
void gemv_q6_k_avx2(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                    float* y);

/// q4_K and q6_K on weights repacked at load, AVX-512 VNNI (kquant_groups_avx512.h,
/// matmul_q4_k_avx512.cpp, matmul_q6_k_avx512.cpp): their kernels' prepare hooks. A
/// prepared row is nb super-blocks of kKGroupActBytes in the kernel's register layout, then
/// the token's Q8_K row itself (from kKGroupActBytes * nb), which the file's-layout path
/// (gemv_q*_k_avx2 and the panels) reads unchanged.
inline constexpr size_t kKGroupActBytes = 384;
/// A file's-layout gemm on such prepared rows: it reads their Q8_K part, so
/// TOKENHIVE_REPACK=0 gives gemm's results bit for bit (each kernel's gemm_prepared).
template <auto Gemm>
void gemm_on_q8k_part(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                      size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  Gemm(w, w_row_bytes, cols, r0, r1, act + kKGroupActBytes * static_cast<size_t>(cols / kQKK), act_row_bytes, n_tokens,
       y, y_stride);
}
/// The kernel on the file's layout `file_layout` (its gemm_prepared = gemm_on_q8k_part of its
/// gemm) with the groups' prepare hooks, pack_rows and gemm_packed added
/// (kquant_groups_avx512.h's with_kq_groups).
MatmulKernel with_q4_k_groups_avx512(MatmulKernel file_layout);
MatmulKernel with_q6_k_groups_avx512(MatmulKernel file_layout);
/// q2_K, q3_K (matmul_q2_k_q3_k_avx512.cpp) and IQ4_XS (matmul_iq4_xs_avx512.cpp) likewise.
MatmulKernel with_q2_k_groups_avx512(MatmulKernel file_layout);
MatmulKernel with_q3_k_groups_avx512(MatmulKernel file_layout);
/// The same with the bit fields unpacked by GFNI (*_avx512gfni.cpp: only where
/// has_avx512_gfni()); bit for bit the plain ones' results.
MatmulKernel with_q2_k_groups_avx512gfni(MatmulKernel file_layout);
MatmulKernel with_q3_k_groups_avx512gfni(MatmulKernel file_layout);
MatmulKernel with_q6_k_groups_avx512gfni(MatmulKernel file_layout);
MatmulKernel with_iq4_xs_groups_avx512(MatmulKernel file_layout);
/// IQ4_XS's with the levels looked up by vpermb (matmul_iq4_xs_avx512vbmi.cpp: only where
/// has_avx512_vbmi()); bit for bit the plain one's results.
MatmulKernel with_iq4_xs_groups_avx512vbmi(MatmulKernel file_layout);

/// IQ4_XS x Q8_K (matmul_iq4_xs_tile.h): whole gemms, MatmulKernel::gemm semantics. IQ4_XS
/// shares the Q8_K activations, not the panels: its levels are signed (-127..113), which
/// vpmaddubsw can only take as |w| with the sign moved onto each token's activations.
void gemm_iq4_xs_avx2(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                      size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride);
void gemm_iq4_xs_avx512(const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1,
                        const uint8_t* act, size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride);

/// Rows unpacked per panel: 8 rows of a 2048-column q4_K matrix take 22 KiB, so panel and a
/// 4-token activation tile (9 KiB) share the 32 KiB L1; wider rows spill to L2, which still
/// feeds the multiply (each panel byte is used for 4 tokens, each activation byte for 2 rows).
inline constexpr int64_t kPanelRows = 8;

}  // namespace th::cpu
