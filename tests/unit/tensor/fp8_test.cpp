// FP8 E4M3 on the host: every one of the 256 codes, the rounding between each pair of
// neighbours, saturation and NaN, and per-row scaling on random rows.
#include "tensor/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace th {
namespace {

// The value of a code, computed independently of fp8.cpp from the format's definition.
double expected_value(int code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  const double mag = e == 0 ? m / 8.0 * std::pow(2.0, -6) : (1 + m / 8.0) * std::pow(2.0, e - 7);
  return s ? -mag : mag;
}

TEST(Fp8E4m3, EveryCodeDecodesToItsValueAndEncodesBack) {
  for (int c = 0; c < 256; ++c) {
    const float v = fp8_e4m3_to_f32(static_cast<uint8_t>(c));
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(v)) << c;
      EXPECT_EQ(f32_to_fp8_e4m3(v) & 0x7f, 0x7f) << c;
      continue;
    }
    EXPECT_EQ(static_cast<double>(v), expected_value(c)) << c;
    EXPECT_EQ(std::signbit(v), (c & 0x80) != 0) << c;  // 0x80 is -0
    EXPECT_EQ(f32_to_fp8_e4m3(v), c) << c;
  }
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_f32(0x08), std::ldexp(1.0f, -6));
}

TEST(Fp8E4m3, RoundsToNearestTiesToEvenBetweenEveryPairOfNeighbours) {
  for (int sign : {0, 0x80}) {
    for (int c = 0; c < 0x7e; ++c) {  // c and c + 1 are adjacent in magnitude
      const float lo = fp8_e4m3_to_f32(static_cast<uint8_t>(sign | c));
      const float hi = fp8_e4m3_to_f32(static_cast<uint8_t>(sign | (c + 1)));
      const float mid = (lo + hi) / 2;  // exact in f32
      const int even = (c % 2 == 0) ? c : c + 1;
      EXPECT_EQ(f32_to_fp8_e4m3(mid), sign | even) << c;
      EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(mid, lo)), sign | c) << c;
      EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(mid, hi)), sign | (c + 1)) << c;
    }
  }
}

TEST(Fp8E4m3, SaturatesAtMaxAndKeepsNan) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {448.0f, 449.0f, 464.0f, 480.0f, 1e6f, 3e38f, inf}) {
    EXPECT_EQ(f32_to_fp8_e4m3(x), 0x7e) << x;
    EXPECT_EQ(f32_to_fp8_e4m3(-x), 0xfe) << x;
  }
  EXPECT_EQ(f32_to_fp8_e4m3(std::nanf("")), 0x7f);
  EXPECT_EQ(f32_to_fp8_e4m3(-std::nanf("")), 0xff);
  // Below half the smallest subnormal: zero, with its sign; exactly half: ties to even (0).
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.0f, -11)), 0x00);
  EXPECT_EQ(f32_to_fp8_e4m3(-std::ldexp(1.0f, -11)), 0x80);
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0x01);
}

TEST(Fp8E4m3, RandomRowsWithinHalfAStepOfTheirScale) {
  std::mt19937 rng(8);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 700);
    const float mag = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
    std::normal_distribution<float> d(0.0f, mag);
    std::vector<float> x(static_cast<size_t>(n)), back(x.size());
    for (float& v : x) v = d(rng);
    std::vector<uint8_t> codes(x.size());
    const float scale = quantize_row_fp8_e4m3(x.data(), codes.data(), n);
    dequantize_row_fp8_e4m3(codes.data(), scale, back.data(), n);
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    EXPECT_FLOAT_EQ(scale, amax / 448.0f);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_FALSE(std::isnan(back[i]));
      // Normal range: half a step is 2^-4 of the value; subnormal range: half of 2^-9 * scale.
      // The factor covers the rounding of x / scale and of the product back.
      const double bound = std::max(std::fabs(x[i]) / 16.0, std::ldexp(1.0, -10) * scale) * 1.0001;
      EXPECT_LE(std::fabs(static_cast<double>(back[i]) - x[i]), bound) << trial << " " << i;
    }
  }
}

TEST(Fp8E4m3, RowScaleIgnoresNanAndInf) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {1.0f, -2.0f, std::nanf(""), inf, -inf, 0.5f};
  std::vector<uint8_t> c(x.size());
  const float scale = quantize_row_fp8_e4m3(x.data(), c.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(scale, 2.0f / 448.0f);
  EXPECT_EQ(c[1], 0xfe);
  EXPECT_EQ(c[2] & 0x7f, 0x7f);
  EXPECT_EQ(c[3], 0x7e);
  EXPECT_EQ(c[4], 0xfe);
  std::vector<uint8_t> z(3);
  const std::vector<float> zeros = {0.0f, -0.0f, 0.0f};
  EXPECT_EQ(quantize_row_fp8_e4m3(zeros.data(), z.data(), 3), 1.0f);
  EXPECT_EQ(z[0], 0x00);
  EXPECT_EQ(z[1], 0x80);
}

}  // namespace
}  // namespace th
