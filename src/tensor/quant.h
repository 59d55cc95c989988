// Reference (plain, obviously right) conversion between f32 and every
// dequantizable DType, following ggml's block definitions bit for bit.
// Fast kernels live in backend/ and are tested against these.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace th {

/// @brief Converts n elements of type t at src to f32. n is a multiple of the block size;
/// t must have can_dequantize (otherwise this aborts with a message). src needs no alignment.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

/// @brief Quantizes n f32 values into type t (reference quantizer, as ggml's *_ref: the same
/// bytes as llama.cpp writes). n is a multiple of the block size; t must have can_dequantize
/// (otherwise this aborts). dst needs no alignment. nan/inf spoil only their own block.
void quantize_row(DType t, const float* src, void* dst, int64_t n);

}  // namespace th
