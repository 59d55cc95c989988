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
enum class DeviceWeightType { F32, F16, BF16 };

/// f32 -> F32, f16 -> F16, bf16 -> BF16 (the file's bytes, uploaded as they are); every
/// other dequantizable type -> F16 (dequantized on the host with the reference
/// dequantizer, rounded to nearest even f16). Types without a dequantizer: false.
bool device_weight_type(DType t, DeviceWeightType* out);

/// Bytes per element of a device weight type.
int device_weight_type_size(DeviceWeightType t);

/// The bytes uploaded for w: rows * cols elements of device_weight_type(w.type), row-major.
/// For f32/f16/bf16 a copy of the file's bytes; for quantized types dequantize_row then
/// f32_to_f16. w.type must have a device type (callers check device_weight_type first).
std::vector<uint8_t> device_weight_image(const WeightView& w);

}  // namespace th::cuda
