// Host-side planning for the CUDA backend, plain C++ and unit-tested without a
// GPU: which form a weight of each GGUF type takes in device memory, and the
// bytes uploaded for it.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "tensor/dtype.h"

namespace th::cuda {

/// The element type a weight is stored as on the device.
enum class DeviceWeightType { F32, F16, BF16, FP8 };

/// f32 -> F32, f16 -> F16, bf16 -> BF16 (the file's bytes, uploaded as they are); fp8_e4m3
/// (the fp8 compute type's blocks, tensor/fp8.h) -> FP8 (the same codes and scales,
/// rearranged: see device_weight_image); every other dequantizable type -> F16
/// (dequantized on the host with the reference dequantizer, rounded to nearest even f16).
/// Types without a dequantizer: false.
bool device_weight_type(DType t, DeviceWeightType* out);

/// Bytes per element of a device weight type (FP8: the codes alone; the scales follow them).
int device_weight_type_size(DeviceWeightType t);

/// Where an FP8 image's scale exponents start: after the rows * cols codes, rounded up to 16.
size_t fp8_scales_offset(int64_t rows, int64_t cols);

/// The bytes uploaded for w: rows * cols elements of device_weight_type(w.type), row-major.
/// For f32/f16/bf16 a copy of the file's bytes; for quantized types dequantize_row then
/// f32_to_f16. For fp8_e4m3 the 32 codes of every block, row-major (rows * cols bytes, so a
/// row's codes are contiguous and 16-byte loads need no realignment), then from
/// fp8_scales_offset one scale exponent byte per block, in the same order: the file's
/// bytes, exactly, in two arrays. w.type must have a device type (callers check
/// device_weight_type first).
std::vector<uint8_t> device_weight_image(const WeightView& w);

}  // namespace th::cuda
