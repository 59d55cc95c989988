#include "backend/cuda/weight_plan.h"

#include <cstdlib>
#include <cstring>

#include "tensor/fp8.h"
#include "tensor/half.h"
#include "tensor/quant.h"

namespace th::cuda {

bool device_weight_type(DType t, DeviceWeightType* out) {
  switch (t) {
    case DType::F32: *out = DeviceWeightType::F32; return true;
    case DType::F16: *out = DeviceWeightType::F16; return true;
    case DType::BF16: *out = DeviceWeightType::BF16; return true;
    case DType::FP8_E4M3: *out = DeviceWeightType::FP8; return true;
    default:
      if (!dtype_info(t).can_dequantize) return false;
      *out = DeviceWeightType::F16;
      return true;
  }
}

int device_weight_type_size(DeviceWeightType t) {
  switch (t) {
    case DeviceWeightType::F32: return 4;
    case DeviceWeightType::FP8: return 1;
    default: return 2;
  }
}

size_t fp8_scales_offset(int64_t rows, int64_t cols) {
  return (static_cast<size_t>(rows) * static_cast<size_t>(cols) + 15) / 16 * 16;
}

std::vector<uint8_t> device_weight_image(const WeightView& w) {
  DeviceWeightType dt{};
  if (!device_weight_type(w.type, &dt)) std::abort();
  const size_t n = static_cast<size_t>(w.rows) * static_cast<size_t>(w.cols);
  if (dt == DeviceWeightType::FP8) {
    const size_t blocks = n / kFp8BlockElements;
    const size_t at = fp8_scales_offset(w.rows, w.cols);
    std::vector<uint8_t> out(at + blocks);
    const auto* src = static_cast<const uint8_t*>(w.data);
    for (size_t b = 0; b < blocks; ++b) {  // a row's blocks follow each other: cols % 32 == 0
      out[at + b] = src[b * kFp8BlockBytes];
      std::memcpy(out.data() + b * kFp8BlockElements, src + b * kFp8BlockBytes + 1, kFp8BlockElements);
    }
    return out;
  }
  std::vector<uint8_t> out(n * static_cast<size_t>(device_weight_type_size(dt)));
  if (w.type == DType::F32 || w.type == DType::F16 || w.type == DType::BF16) {
    if (!out.empty()) std::memcpy(out.data(), w.data, out.size());
    return out;
  }
  const size_t rb = row_bytes(w.type, w.cols);
  std::vector<float> row(static_cast<size_t>(w.cols));
  auto* dst = reinterpret_cast<uint16_t*>(out.data());
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r) * rb, row.data(), w.cols);
    for (int64_t c = 0; c < w.cols; ++c) {
      const uint16_t h = f32_to_f16(row[static_cast<size_t>(c)]);
      std::memcpy(dst + static_cast<size_t>(r) * static_cast<size_t>(w.cols) + static_cast<size_t>(c), &h, 2);
    }
  }
  return out;
}

}  // namespace th::cuda
