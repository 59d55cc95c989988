// The CUDA backend's host-side weight plan: runs without a GPU.
#include "backend/cuda/weight_plan.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "tensor/half.h"
#include "tensor/quant.h"

namespace th {
namespace {

using cuda::DeviceWeightType;

const DType kAll[] = {DType::F32, DType::F16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                      DType::Q8_1, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K,
                      DType::IQ4_NL, DType::IQ4_XS, DType::I8, DType::I16, DType::I32, DType::I64, DType::F64,
                      DType::BF16, DType::FP8_E4M3};

TEST(CudaWeightPlan, FloatTypesKeepTheirFormQuantizedBecomeF16) {
  for (DType t : kAll) {
    DeviceWeightType d{};
    const bool ok = cuda::device_weight_type(t, &d);
    EXPECT_EQ(ok, dtype_info(t).can_dequantize) << dtype_name(t);
    if (!ok) continue;
    if (t == DType::F32) EXPECT_EQ(d, DeviceWeightType::F32);
    else if (t == DType::BF16) EXPECT_EQ(d, DeviceWeightType::BF16);
    else if (t == DType::FP8_E4M3) EXPECT_EQ(d, DeviceWeightType::FP8);
    else EXPECT_EQ(d, DeviceWeightType::F16) << dtype_name(t);
  }
  EXPECT_EQ(cuda::device_weight_type_size(DeviceWeightType::F32), 4);
  EXPECT_EQ(cuda::device_weight_type_size(DeviceWeightType::F16), 2);
  EXPECT_EQ(cuda::device_weight_type_size(DeviceWeightType::BF16), 2);
  EXPECT_EQ(cuda::device_weight_type_size(DeviceWeightType::FP8), 1);
}

TEST(CudaWeightPlan, Fp8IsItsCodesRowMajorThenItsScaleExponents) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-3, 3);
  const int64_t rows = 3, cols = 96;  // 9 blocks: codes end at 288, scales start at 288
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (float& v : x) v = d(rng);
  const size_t rb = row_bytes(DType::FP8_E4M3, cols);
  std::vector<uint8_t> file(rb * rows);
  for (int64_t r = 0; r < rows; ++r) quantize_row(DType::FP8_E4M3, x.data() + r * cols, file.data() + r * rb, cols);
  const std::vector<uint8_t> img = cuda::device_weight_image({DType::FP8_E4M3, rows, cols, file.data()});
  const size_t at = cuda::fp8_scales_offset(rows, cols);
  EXPECT_EQ(at, 288u);
  EXPECT_EQ(cuda::fp8_scales_offset(1, 32), 32u);
  EXPECT_EQ(cuda::fp8_scales_offset(1, 40), 48u);
  ASSERT_EQ(img.size(), at + 9);
  for (size_t b = 0; b < 9; ++b) {
    EXPECT_EQ(img[at + b], file[b * 33]) << b;
    for (size_t i = 0; i < 32; ++i) ASSERT_EQ(img[b * 32 + i], file[b * 33 + 1 + i]) << b << " " << i;
  }
}

TEST(CudaWeightPlan, ImageIsTheFileBytesOrTheF16OfTheReferenceDequantization) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1, 1);
  const int64_t rows = 5, cols = 512;
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (float& v : x) v = d(rng);
  for (DType t : kAll) {
    if (!dtype_info(t).can_dequantize || t == DType::FP8_E4M3) continue;  // FP8: the test above
    const size_t rb = row_bytes(t, cols);
    std::vector<uint8_t> file(rb * rows);
    for (int64_t r = 0; r < rows; ++r) quantize_row(t, x.data() + r * cols, file.data() + r * rb, cols);
    const WeightView w{t, rows, cols, file.data()};
    const std::vector<uint8_t> img = cuda::device_weight_image(w);
    DeviceWeightType dt{};
    ASSERT_TRUE(cuda::device_weight_type(t, &dt));
    ASSERT_EQ(img.size(), static_cast<size_t>(rows * cols * cuda::device_weight_type_size(dt))) << dtype_name(t);
    if (t == DType::F32 || t == DType::F16 || t == DType::BF16) {
      EXPECT_EQ(img, file) << dtype_name(t);
      continue;
    }
    std::vector<float> deq(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(t, file.data() + r * rb, deq.data(), cols);
      for (int64_t c = 0; c < cols; ++c) {
        uint16_t h;
        std::memcpy(&h, img.data() + 2 * (r * cols + c), 2);
        ASSERT_EQ(h, f32_to_f16(deq[static_cast<size_t>(c)])) << dtype_name(t) << " " << r << " " << c;
      }
    }
  }
}

}  // namespace
}  // namespace th
