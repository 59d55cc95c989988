// FP8 E4M3 on the host: every one of the 256 codes, the rounding between each pair of
// neighbours, saturation and NaN, and per-row scaling on random rows.
#include "tensor/fp8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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

// Every 613th float from 2^-12 to 512, both signs, against the definition: the code of the
// nearest value, ties to the even code (found by looking at all 127 finite magnitudes).
TEST(Fp8E4m3, EncodingIsTheNearestCodeOverASweepOfFloats) {
  std::vector<double> mags;
  for (int c = 0; c < 0x7f; ++c) mags.push_back(expected_value(c));
  uint32_t lo_bits, hi_bits;
  const float lo = std::ldexp(1.0f, -12), hi = 512.0f;
  std::memcpy(&lo_bits, &lo, 4);
  std::memcpy(&hi_bits, &hi, 4);
  int64_t checked = 0;
  for (uint32_t b = lo_bits; b < hi_bits; b += 613) {
    float v;
    std::memcpy(&v, &b, 4);
    int best = 0;
    for (int c = 1; c < 0x7f; ++c) {
      const double d = std::fabs(mags[c] - v), db = std::fabs(mags[best] - v);
      if (d < db || (d == db && c % 2 == 0)) best = c;
    }
    if (v >= 448.0f) best = 0x7e;  // saturation, not the nearest
    ASSERT_EQ(f32_to_fp8_e4m3(v), best) << v;
    ASSERT_EQ(f32_to_fp8_e4m3(-v), 0x80 | best) << -v;
    ++checked;
  }
  EXPECT_GT(checked, 100000);
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

namespace th {
namespace {

// DType::FP8_E4M3 blocks: the scale is the smallest power of two that brings the block's
// largest magnitude to <= 448, every value decodes within e4m3's half step (2^-4 relative
// for normals, 2^-10 scaled for subnormals), and a zero block decodes to zeros.
TEST(Fp8E4m3Block, ScaleIsTheSmallestPowerOfTwoAndValuesKeepHalfAStep) {
  std::mt19937 rng(17);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (float mag : {1e-30f, 1e-6f, 0.02f, 1.0f, 448.0f, 3e5f, 1e30f}) {
    float x[kFp8BlockElements];
    for (float& v : x) v = g(rng) * mag;
    x[5] = 448.0f * mag;  // an exact power-of-two case when mag is one
    uint8_t b[kFp8BlockBytes];
    quantize_block_fp8_e4m3(x, b);
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    const double scale = std::ldexp(1.0, b[0] - 127);
    EXPECT_LE(amax / scale, 448.0) << mag;
    EXPECT_GT(amax / scale, 224.0) << mag;
    float y[kFp8BlockElements];
    dequantize_block_fp8_e4m3(b, y);
    for (int i = 0; i < kFp8BlockElements; ++i) {
      const double err = std::fabs(static_cast<double>(y[i]) - x[i]);
      EXPECT_LE(err, std::max(std::fabs(x[i]) * 0x1p-4, scale * 0x1p-10)) << mag << " element " << i;
    }
  }
  float zeros[kFp8BlockElements] = {};
  uint8_t b[kFp8BlockBytes];
  quantize_block_fp8_e4m3(zeros, b);
  EXPECT_EQ(b[0], 127);
  float y[kFp8BlockElements];
  dequantize_block_fp8_e4m3(b, y);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

TEST(Fp8E4m3Block, ScaleExponentIsClampedToTheKernelsRange) {
  float big[kFp8BlockElements], tiny[kFp8BlockElements];
  for (int i = 0; i < kFp8BlockElements; ++i) {
    big[i] = std::numeric_limits<float>::max() * (i % 2 ? -1.0f : 1.0f);
    tiny[i] = std::numeric_limits<float>::denorm_min();
  }
  uint8_t b[kFp8BlockBytes];
  quantize_block_fp8_e4m3(big, b);
  EXPECT_EQ(b[0], kFp8MaxScaleExp);
  EXPECT_EQ(b[1], 0x7e);  // saturated at 448 x 2^119
  EXPECT_EQ(b[2], 0xfe);
  quantize_block_fp8_e4m3(tiny, b);
  EXPECT_EQ(b[0], kFp8MinScaleExp);
}

}  // namespace
}  // namespace th
