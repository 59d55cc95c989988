// Reference block codecs of the low-bit GGUF types: q2_K, q3_K (ggml's k-quants of 2 and 3
// bits) and iq4_nl, iq4_xs (4-bit levels on a non-linear grid), in ggml's float operations.
// quant.cpp's dequantize_row / quantize_row call them; use those.
#pragma once

#include "tensor/quant_blocks.h"

namespace th {

void dequantize_block(const BlockQ2_K& b, float* y);
void dequantize_block(const BlockQ3_K& b, float* y);
void dequantize_block(const BlockIQ4_NL& b, float* y);
void dequantize_block(const BlockIQ4_XS& b, float* y);

/// ggml's quantize_row_q2_K_ref / quantize_row_q3_K_ref (what llama-quantize writes without an
/// importance matrix), and quantize_iq4_nl / quantize_iq4_xs without one (7 scale trials each
/// side; note ggml's quantize_row_iq4_nl_ref tries none and writes other bytes).
void quantize_block(const float* x, BlockQ2_K& b);
void quantize_block(const float* x, BlockQ3_K& b);
void quantize_block(const float* x, BlockIQ4_NL& b);
void quantize_block(const float* x, BlockIQ4_XS& b);

}  // namespace th
