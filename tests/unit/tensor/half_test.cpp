#include "tensor/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace th {
namespace {

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

float float_of(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

bool is_f16_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

// The IEEE binary16 value of h from its definition, independently of half.h.
double f16_definition(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  const double mag = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return sign ? -mag : mag;
}

TEST(HalfF16, DecodesKnownBitPatterns) {
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xBC00), -1.0f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0400), 6.103515625e-05f);         // smallest normal, 2^-14
  EXPECT_EQ(f16_to_f32(0x03FF), 6.097555160522461e-05f);   // largest subnormal, 1023 * 2^-24
  EXPECT_EQ(f16_to_f32(0x0001), 5.9604644775390625e-08f);  // smallest subnormal, 2^-24
  EXPECT_EQ(bits_of(f16_to_f32(0x0000)), 0x00000000u);
  EXPECT_EQ(bits_of(f16_to_f32(0x8000)), 0x80000000u);  // -0 keeps its sign
  EXPECT_EQ(f16_to_f32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_f32(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7C01)));
}

// F16C's vcvtph2ps and ggml's software path both return f16 nans as quiet f32 nans.
TEST(HalfF16, NanDecodesToQuietNanWithItsPayload) {
  EXPECT_EQ(bits_of(f16_to_f32(0x7C01)), 0x7FC02000u);  // signalling in f16
  EXPECT_EQ(bits_of(f16_to_f32(0x7E00)), 0x7FC00000u);
  EXPECT_EQ(bits_of(f16_to_f32(0xFD55)), 0xFFEAA000u);
  for (uint32_t h = 0x7C01; h <= 0x7FFF; ++h) {
    ASSERT_NE(bits_of(f16_to_f32(static_cast<uint16_t>(h))) & 0x00400000u, 0u) << std::hex << h;
  }
}

TEST(HalfF16, EncodesKnownValues) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_EQ(f32_to_f16(1e6f), 0x7C00);    // overflow goes to inf
  EXPECT_EQ(f32_to_f16(1e-10f), 0x0000);  // underflow goes to zero
  EXPECT_TRUE(is_f16_nan(f32_to_f16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(is_f16_nan(f32_to_f16(float_of(0x7F800001))));  // payload only in low bits: still nan, not inf
  EXPECT_TRUE(is_f16_nan(f32_to_f16(float_of(0xFFC00000))));
}

TEST(HalfF16, RoundsTiesToEven) {
  // Normal range: an f16 ulp at 1.0 is 2^-10.
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // halfway to 0x3C01: stays even
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // halfway 0x3C01..0x3C02: up to even
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);  // past halfway
  EXPECT_EQ(f32_to_f16(2049.0f), 0x6800);                                               // between 2048 (even) and 2050
  EXPECT_EQ(f32_to_f16(2051.0f), 0x6802);                                               // between 2050 (odd) and 2052
  // 65520 is halfway between 65504 (odd mantissa) and 65536, which is inf.
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);
  // Subnormal range: the ulp is 2^-24.
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);     // halfway 0..1: even
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);     // halfway 1..2: even
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);     // past halfway
  EXPECT_EQ(f32_to_f16(std::ldexp(2047.0f, -25)), 0x0400);  // halfway 0x3FF..0x400 rounds into the normals
  EXPECT_EQ(f32_to_f16(-std::ldexp(3.0f, -25)), 0x8002);
}

TEST(HalfF16, EveryPatternDecodesToItsDefinitionAndRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t h16 = static_cast<uint16_t>(h);
    const float f = f16_to_f32(h16);
    if (is_f16_nan(h16)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      const uint16_t back = f32_to_f16(f);
      ASSERT_TRUE(is_f16_nan(back)) << std::hex << h;
      ASSERT_EQ(back & 0x8000, h16 & 0x8000) << std::hex << h;
      continue;
    }
    if ((h16 & 0x7fff) == 0x7c00) {
      ASSERT_TRUE(std::isinf(f)) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), f16_definition(h16)) << std::hex << h;
    }
    ASSERT_EQ(f32_to_f16(f), h16) << std::hex << h;
  }
}

// At every finite f16 value, the f32 values just below, at and just above the midpoint to
// the next f16 must round down, to the even neighbour, and up.
TEST(HalfF16, EveryMidpointRoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x7BFF; ++h) {  // positive finite, each with its successor
    const uint16_t lo = static_cast<uint16_t>(h), hi = static_cast<uint16_t>(h + 1);
    const float mid = static_cast<float>((f16_definition(lo) + f16_definition(hi)) / 2);  // exact in f32
    const uint16_t even = (lo & 1) == 0 ? lo : hi;
    ASSERT_EQ(f32_to_f16(mid), even) << std::hex << h;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, 0.0f)), lo) << std::hex << h;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, 1e9f)), hi) << std::hex << h;
    ASSERT_EQ(f32_to_f16(-mid), 0x8000 | even) << std::hex << h;
  }
}

TEST(HalfBF16, DecodesKnownBitPatterns) {
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xC040), -3.0f);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
  EXPECT_EQ(bf16_to_f32(0x7F7F), 3.3895313892515355e38f);  // largest finite
  EXPECT_EQ(bf16_to_f32(0x0001), std::ldexp(1.0f, -133));  // smallest subnormal
  EXPECT_EQ(bf16_to_f32(0x7F80), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(bf16_to_f32(0x7FC0)));
  EXPECT_EQ(bits_of(bf16_to_f32(0x8000)), 0x80000000u);
}

TEST(HalfBF16, EncodesWithTiesToEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(3.14159274f), 0x4049);           // 0x40490FDB: below halfway
  EXPECT_EQ(f32_to_bf16(float_of(0x3F808000)), 0x3F80);  // halfway, even stays
  EXPECT_EQ(f32_to_bf16(float_of(0x3F818000)), 0x3F82);  // halfway, odd goes up
  EXPECT_EQ(f32_to_bf16(float_of(0x3F808001)), 0x3F81);  // past halfway
  EXPECT_EQ(f32_to_bf16(float_of(0xBF818000)), 0xBF82);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16(float_of(0x7F7FFFFF)), 0x7F80);  // FLT_MAX rounds to inf
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  // A nan whose payload is only in the bits that are dropped must not turn into inf.
  const uint16_t n = f32_to_bf16(float_of(0x7F800001));
  EXPECT_EQ(n & 0x7F80, 0x7F80);
  EXPECT_NE(n & 0x7F, 0);
}

TEST(HalfBF16, EveryPatternRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t b16 = static_cast<uint16_t>(b);
    const float f = bf16_to_f32(b16);
    ASSERT_EQ(bits_of(f), b << 16);
    const bool nan = (b16 & 0x7F80) == 0x7F80 && (b16 & 0x7F) != 0;
    if (nan) {
      const uint16_t back = f32_to_bf16(f);
      ASSERT_TRUE((back & 0x7F80) == 0x7F80 && (back & 0x7F) != 0) << std::hex << b;
    } else {
      ASSERT_EQ(f32_to_bf16(f), b16) << std::hex << b;
    }
  }
}

}  // namespace
}  // namespace th
