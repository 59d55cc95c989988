#include "tensor/quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"

namespace th {
namespace {

constexpr DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,   DType::Q4_0,  DType::Q4_1,
                               DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K,   DType::Q6_K,  DType::Q2_K,
                               DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS};

std::vector<float> dequant(DType t, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> y(n);
  dequantize_row(t, bytes.data(), y.data(), n);
  return y;
}

std::vector<uint8_t> quant(DType t, const float* x, int64_t n) {
  std::vector<uint8_t> bytes(row_bytes(t, n));
  quantize_row(t, x, bytes.data(), n);
  return bytes;
}

// Little-endian fp16 bits, spelled out so that blocks are built byte by byte.
void put16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v & 0xff);
  b[at + 1] = static_cast<uint8_t>(v >> 8);
}

// fp16 bit patterns used below.
constexpr uint16_t kHalf = 0x3800;      // 0.5
constexpr uint16_t kQuarter = 0x3400;   // 0.25
constexpr uint16_t kOne = 0x3C00;       // 1.0
constexpr uint16_t kMinusOne = 0xBC00;  // -1.0
constexpr uint16_t kTwo = 0x4000;       // 2.0
constexpr uint16_t kMinusFour = 0xC400;

TEST(QuantLayout, BlockStructsMatchTheDTypeTable) {
  auto expect = [](DType t, size_t size, int elements) {
    EXPECT_EQ(size, dtype_info(t).type_size) << dtype_name(t);
    EXPECT_EQ(static_cast<uint32_t>(elements), dtype_info(t).block_size) << dtype_name(t);
    EXPECT_TRUE(dtype_info(t).can_dequantize) << dtype_name(t);
  };
  expect(DType::Q8_0, sizeof(BlockQ8_0), BlockQ8_0::kElements);
  expect(DType::Q4_0, sizeof(BlockQ4_0), BlockQ4_0::kElements);
  expect(DType::Q4_1, sizeof(BlockQ4_1), BlockQ4_1::kElements);
  expect(DType::Q5_0, sizeof(BlockQ5_0), BlockQ5_0::kElements);
  expect(DType::Q5_1, sizeof(BlockQ5_1), BlockQ5_1::kElements);
  expect(DType::Q4_K, sizeof(BlockQ4_K), BlockQ4_K::kElements);
  expect(DType::Q5_K, sizeof(BlockQ5_K), BlockQ5_K::kElements);
  expect(DType::Q6_K, sizeof(BlockQ6_K), BlockQ6_K::kElements);
  expect(DType::Q2_K, sizeof(BlockQ2_K), BlockQ2_K::kElements);
  expect(DType::Q3_K, sizeof(BlockQ3_K), BlockQ3_K::kElements);
  expect(DType::IQ4_NL, sizeof(BlockIQ4_NL), BlockIQ4_NL::kElements);
  expect(DType::IQ4_XS, sizeof(BlockIQ4_XS), BlockIQ4_XS::kElements);
}

// ------------------------------------------------------------------ dequantization by hand

TEST(QuantDequant, F32ByHand) {
  const std::vector<uint8_t> b = {0x00, 0x00, 0xC0, 0x3F,   // 1.5
                                  0x00, 0x00, 0x00, 0xC0,   // -2
                                  0xCD, 0xCC, 0xCC, 0x3D};  // 0.1f
  const std::vector<float> y = dequant(DType::F32, b, 3);
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], 0.1f);
}

TEST(QuantDequant, F16ByHand) {
  const std::vector<uint8_t> b = {0x00, 0x3C, 0x00, 0xC0, 0xFF, 0x7B, 0x01, 0x00, 0x55, 0x35};
  const std::vector<float> y = dequant(DType::F16, b, 5);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], 65504.0f);
  EXPECT_EQ(y[3], 5.9604644775390625e-08f);  // 2^-24
  EXPECT_EQ(y[4], 0.333251953125f);          // 0x155 / 1024 + 1, times 2^-2
}

TEST(QuantDequant, BF16ByHand) {
  const std::vector<uint8_t> b = {0x80, 0x3F, 0x40, 0xC0, 0x49, 0x40, 0x80, 0xFF};
  const std::vector<float> y = dequant(DType::BF16, b, 4);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -3.0f);
  EXPECT_EQ(y[2], 3.140625f);
  EXPECT_EQ(y[3], -std::numeric_limits<float>::infinity());
}

TEST(QuantDequant, Q8_0ByHand) {
  // Two blocks, so the second block's own d is used: {d = 0.5, qs[j] = 8j - 128}, {d = -4, qs[j] = 127 - j}.
  std::vector<uint8_t> b(2 * 34);
  put16(b, 0, kHalf);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(8 * j - 128));
  put16(b, 34, kMinusFour);
  for (int j = 0; j < 32; ++j) b[36 + j] = static_cast<uint8_t>(127 - j);
  const std::vector<float> y = dequant(DType::Q8_0, b, 64);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y[j], (8 * j - 128) * 0.5f) << j;
    EXPECT_EQ(y[32 + j], (127 - j) * -4.0f) << j;
  }
  EXPECT_EQ(y[0], -64.0f);
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[31], 60.0f);
  EXPECT_EQ(y[32], -508.0f);
}

// 32-element blocks below use qs[i] = i | (15 - i) << 4: element i < 16 has low bits i,
// element 16 + i has low bits 15 - i.
void fill_q32_nibbles(std::vector<uint8_t>& b, size_t at) {
  for (int i = 0; i < 16; ++i) b[at + i] = static_cast<uint8_t>(i | (15 - i) << 4);
}
int q32_low_bits(int e) { return e < 16 ? e : 31 - e; }

TEST(QuantDequant, Q4_0ByHand) {
  std::vector<uint8_t> b(18);
  put16(b, 0, kHalf);
  fill_q32_nibbles(b, 2);
  EXPECT_EQ(b[2], 0xF0);
  EXPECT_EQ(b[17], 0x0F);
  const std::vector<float> y = dequant(DType::Q4_0, b, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], (q32_low_bits(e) - 8) * 0.5f) << e;
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[8], 0.0f);
  EXPECT_EQ(y[15], 3.5f);
  EXPECT_EQ(y[16], 3.5f);
  EXPECT_EQ(y[31], -4.0f);
}

TEST(QuantDequant, Q4_1ByHand) {
  // d = 0.25, m = -1; qs[i] = i | ((3i) % 16) << 4.
  std::vector<uint8_t> b(20);
  put16(b, 0, kQuarter);
  put16(b, 2, kMinusOne);
  for (int i = 0; i < 16; ++i) b[4 + i] = static_cast<uint8_t>(i | ((3 * i) % 16) << 4);
  const std::vector<float> y = dequant(DType::Q4_1, b, 32);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(y[i], i * 0.25f - 1.0f) << i;
    EXPECT_EQ(y[16 + i], ((3 * i) % 16) * 0.25f - 1.0f) << i;
  }
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[15], 2.75f);
  EXPECT_EQ(y[21], 2.75f);  // 3 * 5 = 15
  EXPECT_EQ(y[22], -0.5f);  // 3 * 6 = 18 -> 2
}

TEST(QuantDequant, Q5_0ByHand) {
  // d = 2; qh = A5 00 FF 01: bit 4 set for elements 0, 2, 5, 7, 16..23 and 24.
  std::vector<uint8_t> b(22);
  put16(b, 0, kTwo);
  b[2] = 0xA5;
  b[3] = 0x00;
  b[4] = 0xFF;
  b[5] = 0x01;
  fill_q32_nibbles(b, 6);
  auto high = [](int e) { return e == 0 || e == 2 || e == 5 || e == 7 || (e >= 16 && e <= 24); };
  const std::vector<float> y = dequant(DType::Q5_0, b, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], (q32_low_bits(e) + (high(e) ? 16 : 0) - 16) * 2.0f) << e;
  EXPECT_EQ(y[0], 0.0f);     // 0 + 16 - 16
  EXPECT_EQ(y[1], -30.0f);   // 1 - 16
  EXPECT_EQ(y[7], 14.0f);    // 7 + 16 - 16
  EXPECT_EQ(y[16], 30.0f);   // 15 + 16 - 16
  EXPECT_EQ(y[24], 14.0f);   // 7 + 16 - 16
  EXPECT_EQ(y[25], -20.0f);  // 6 - 16
  EXPECT_EQ(y[31], -32.0f);  // 0 - 16
}

TEST(QuantDequant, Q5_1ByHand) {
  // d = 0.5, m = 1; qh = 00 80 00 C0: bit 4 set for elements 15, 30 and 31.
  std::vector<uint8_t> b(24);
  put16(b, 0, kHalf);
  put16(b, 2, kOne);
  b[4] = 0x00;
  b[5] = 0x80;
  b[6] = 0x00;
  b[7] = 0xC0;
  fill_q32_nibbles(b, 8);
  auto high = [](int e) { return e == 15 || e == 30 || e == 31; };
  const std::vector<float> y = dequant(DType::Q5_1, b, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], (q32_low_bits(e) + (high(e) ? 16 : 0)) * 0.5f + 1.0f) << e;
  EXPECT_EQ(y[14], 8.0f);   // 14 * 0.5 + 1
  EXPECT_EQ(y[15], 16.5f);  // 31 * 0.5 + 1
  EXPECT_EQ(y[30], 9.5f);   // 17 * 0.5 + 1
  EXPECT_EQ(y[31], 9.0f);   // 16 * 0.5 + 1
}

// q4_K / q5_K scales: sub-block j has 6-bit scale kSc[j] and min kMin[j]. Packed by hand:
// bytes 0-3 hold kSc[0..3] in bits 0-5 and bits 4-5 of kSc[4..7] in bits 6-7; bytes 4-7 the
// same for the mins; bytes 8-11 hold the low nibbles of kSc[4..7] | those of kMin[4..7] << 4.
constexpr int kSc[8] = {1, 2, 63, 17, 33, 48, 5, 63};
constexpr int kMin[8] = {0, 3, 40, 63, 21, 34, 60, 15};
constexpr uint8_t kPackedScales[12] = {
    0x81,  //  1 | (33 >> 4) << 6
    0xC2,  //  2 | (48 >> 4) << 6
    0x3F,  // 63 | ( 5 >> 4) << 6
    0xD1,  // 17 | (63 >> 4) << 6
    0x40,  //  0 | (21 >> 4) << 6
    0x83,  //  3 | (34 >> 4) << 6
    0xE8,  // 40 | (60 >> 4) << 6
    0x3F,  // 63 | (15 >> 4) << 6
    0x51,  // (33 & 15) | (21 & 15) << 4
    0x20,  // (48 & 15) | (34 & 15) << 4
    0xC5,  // ( 5 & 15) | (60 & 15) << 4
    0xFF,  // (63 & 15) | (15 & 15) << 4
};

// q4_K/q5_K qs[k] = k % 16 | (15 - k % 16) << 4. Element e = 32j + l sits in byte
// 32 * (j / 2) + l, low nibble for even j: its low bits are l % 16 (even j) or 15 - l % 16.
int qk_low_bits(int e) {
  const int j = e / 32, l = e % 32;
  return j % 2 == 0 ? l % 16 : 15 - l % 16;
}

std::vector<uint8_t> k_block_header() {
  std::vector<uint8_t> b(16);
  put16(b, 0, kHalf);     // d = 0.5
  put16(b, 2, kQuarter);  // dmin = 0.25
  std::copy(kPackedScales, kPackedScales + 12, b.begin() + 4);
  return b;
}

TEST(QuantDequant, Q4_KByHand) {
  std::vector<uint8_t> b = k_block_header();
  for (int k = 0; k < 128; ++k) b.push_back(static_cast<uint8_t>(k % 16 | (15 - k % 16) << 4));
  ASSERT_EQ(b.size(), 144u);
  const std::vector<float> y = dequant(DType::Q4_K, b, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.5f * kSc[e / 32] * qk_low_bits(e) - 0.25f * kMin[e / 32]) << e;
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[32], 14.25f);    // 0.5 * 2 * 15 - 0.25 * 3
  EXPECT_EQ(y[64], -10.0f);    // -0.25 * 40
  EXPECT_EQ(y[65], 21.5f);     // 0.5 * 63 * 1 - 10
  EXPECT_EQ(y[128], -5.25f);   // sub-block 4: -0.25 * 21
  EXPECT_EQ(y[129], 11.25f);   // 0.5 * 33 * 1 - 5.25
  EXPECT_EQ(y[160], 351.5f);   // sub-block 5: 0.5 * 48 * 15 - 0.25 * 34
  EXPECT_EQ(y[224], 468.75f);  // sub-block 7: 0.5 * 63 * 15 - 0.25 * 15
  EXPECT_EQ(y[255], -3.75f);
}

TEST(QuantDequant, Q5_KByHand) {
  // qh[l] = 0x0F for l < 16, 0xF0 after: bit j of qh[l] is bit 4 of element 32j + l, so
  // sub-blocks 0-3 have it for l < 16 and sub-blocks 4-7 for l >= 16.
  std::vector<uint8_t> b = k_block_header();
  for (int l = 0; l < 32; ++l) b.push_back(l < 16 ? 0x0F : 0xF0);
  for (int k = 0; k < 128; ++k) b.push_back(static_cast<uint8_t>(k % 16 | (15 - k % 16) << 4));
  ASSERT_EQ(b.size(), 176u);
  auto high = [](int e) { return (e / 32 < 4) == (e % 32 < 16); };
  const std::vector<float> y = dequant(DType::Q5_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    const int q = qk_low_bits(e) + (high(e) ? 16 : 0);
    EXPECT_EQ(y[e], 0.5f * kSc[e / 32] * q - 0.25f * kMin[e / 32]) << e;
  }
  EXPECT_EQ(y[0], 8.0f);  // 0.5 * 1 * 16
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[32], 30.25f);    // 0.5 * 2 * 31 - 0.75
  EXPECT_EQ(y[128], -5.25f);   // no high bit for l < 16 in sub-block 4
  EXPECT_EQ(y[144], 258.75f);  // 0.5 * 33 * 16 - 5.25
  EXPECT_EQ(y[255], 500.25f);  // 0.5 * 63 * 16 - 3.75
}

TEST(QuantDequant, Q6_KByHand) {
  // Element e: half h = e / 128, quarter g = e % 128 / 32, l = e % 32. Low 4 bits in
  // ql[64h + 32(g % 2) + l] (low nibble for g < 2), high 2 bits at bits 2g of qh[32h + l],
  // scale scales[e / 16], value d * scale * (q - 32).
  // ql[k] = k % 16 | (15 - k % 16) << 4, so the low bits are l % 16 (g < 2) or 15 - l % 16.
  // qh = 0xE4 (fields 3,2,1,0 from the top) in the first half: high bits = g;
  // qh = 0x1B (fields 0,1,2,3) in the second half: high bits = 3 - g.
  constexpr int8_t kScales[16] = {1, -1, 2, -2, 3, 4, 127, -128, 5, 6, 7, 8, -9, 10, 11, 12};
  std::vector<uint8_t> b;
  for (int k = 0; k < 128; ++k) b.push_back(static_cast<uint8_t>(k % 16 | (15 - k % 16) << 4));
  for (int k = 0; k < 64; ++k) b.push_back(k < 32 ? 0xE4 : 0x1B);
  for (int8_t s : kScales) b.push_back(static_cast<uint8_t>(s));
  b.push_back(0);
  b.push_back(0);
  put16(b, 208, kQuarter);
  ASSERT_EQ(b.size(), 210u);
  const std::vector<float> y = dequant(DType::Q6_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, g = e % 128 / 32, l = e % 32;
    const int low = g < 2 ? l % 16 : 15 - l % 16;
    const int high = h == 0 ? g : 3 - g;
    EXPECT_EQ(y[e], 0.25f * kScales[e / 16] * (low + 16 * high - 32)) << e;
  }
  EXPECT_EQ(y[0], -8.0f);      // q 0, scale 1
  EXPECT_EQ(y[16], 8.0f);      // q 0, scale -1
  EXPECT_EQ(y[96], 984.25f);   // q 15 + 48, scale 127: 0.25 * 127 * 31
  EXPECT_EQ(y[127], -512.0f);  // q 0 + 48, scale -128
  EXPECT_EQ(y[128], 20.0f);    // q 0 + 48, scale 5
  EXPECT_EQ(y[200], 20.25f);   // g 2, l 8: q 7 + 16, scale -9
  EXPECT_EQ(y[255], -96.0f);   // q 0, scale 12
}

// ------------------------------------------------------------------ test data

// Reproducible on every standard library, which std::normal_distribution is not.
class Rng {
 public:
  explicit Rng(uint32_t seed) : g_(seed) {}
  double uniform() { return (g_() >> 8) * 0x1p-24; }  // [0, 1)
  double gaussian() {
    const double u1 = 1.0 - uniform(), u2 = uniform();  // u1 in (0, 1]
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  uint32_t below(uint32_t n) { return g_() % n; }

 private:
  std::mt19937 g_;
};

std::vector<float> gaussian_data(int64_t n, uint32_t seed) {
  Rng r(seed);
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(r.gaussian());
  return x;
}

// Runs of 32 whose magnitudes span 1e-3..1e3, with some outliers, all-positive and
// all-negative runs, zero runs and constant runs: the cases that stress per-block scales.
std::vector<float> mixed_data(int64_t n, uint32_t seed) {
  Rng r(seed);
  std::vector<float> x(n);
  for (int64_t b = 0; b < n; b += 32) {
    const double scale = std::pow(10.0, static_cast<int>(r.below(7)) - 3);
    const uint32_t kind = r.below(10);
    for (int64_t i = b; i < b + 32; ++i) {
      double v = r.gaussian() * scale;
      if (kind == 0) v = 0;
      if (kind == 1) v = 0.75 * scale;
      if (kind == 2) v = std::fabs(v) + scale;
      if (kind == 3) v = -std::fabs(v) - 0.5 * scale;
      if (r.below(40) == 0) v *= 8;
      x[i] = static_cast<float>(v);
    }
  }
  return x;
}

// Worst-case error of storing v as fp16 (to nearest): half an ulp, 2^-25 among subnormals.
double f16_err(double v) { return std::max(std::fabs(v) * 0x1p-11, 0x1p-25); }

struct Stats {
  double max_ratio = 0;  // max |error| / bound
  double max_rel = 0;    // max |error| / max |x| of its block
};

using BoundFn = std::function<double(const float* block, int i)>;

// Quantizes `rows` rows of n values each and checks every element against bound(block, i).
Stats check_rows(DType t, const std::vector<float>& x, int rows, int64_t n, int block, const BoundFn& bound) {
  Stats s;
  for (int r = 0; r < rows; ++r) {
    const float* row = x.data() + r * n;
    const std::vector<float> y = dequant(t, quant(t, row, n), n);
    for (int64_t b = 0; b < n; b += block) {
      float amax = 0;
      for (int i = 0; i < block; ++i) amax = std::max(amax, std::fabs(row[b + i]));
      for (int i = 0; i < block; ++i) {
        const double err = std::fabs(static_cast<double>(row[b + i]) - y[b + i]);
        const double lim = bound(row + b, i);
        EXPECT_LE(err, lim) << dtype_name(t) << " row " << r << " element " << b + i << " x=" << row[b + i]
                            << " y=" << y[b + i];
        if (err > lim) return s;
        s.max_ratio = std::max(s.max_ratio, lim > 0 ? err / lim : 0.0);
        if (amax > 0) s.max_rel = std::max(s.max_rel, err / amax);
      }
    }
  }
  return s;
}

void print_stats(const char* what, DType t, const Stats& s) {
  std::printf("  %-5s %-8s max |err|/bound %.3f, max |err|/block amax %.5f\n", std::string(dtype_name(t)).c_str(), what,
              s.max_ratio, s.max_rel);
}

// Row shapes: an odd number of rows with an odd number of blocks each.
constexpr int kRows = 5;
constexpr int64_t kN32 = 32 * 9;
constexpr int64_t kN256 = 256 * 3;

void block_min_max(const float* b, double& min, double& max, double& amax) {
  min = b[0];
  max = b[0];
  for (int i = 1; i < 32; ++i) {
    min = std::min<double>(min, b[i]);
    max = std::max<double>(max, b[i]);
  }
  amax = std::max(std::fabs(min), std::fabs(max));
}

// q8_0: d = amax / 127 and q = round(x / d), so |x - q d| <= d / 2; storing d as fp16
// moves each value by at most |q| * f16_err(d) <= 127 f16_err(d). The 1e-6 amax term
// covers float rounding in x / d (a few ulps of 127).
double q8_0_bound(const float* b, int) {
  double min, max, amax;
  block_min_max(b, min, max, amax);
  const double d = amax / 127;
  return d / 2 + 127 * f16_err(d) + 1e-6 * amax;
}

// q4_0 / q5_0: d = max / -half where max is the value of largest magnitude, so x / d lies
// in [-half, half] and q - half = round(x / d) clamped to half - 1: error <= |d| / 2,
// except for values on the side opposite to max beyond (half - 0.5) |d|, which are clipped
// to (half - 1) |d|: error <= |d| there. fp16 d adds half * f16_err(d).
double sym_bound(const float* b, int i, int half) {
  double min, max, amax;
  block_min_max(b, min, max, amax);
  const double signed_max = std::fabs(min) > std::fabs(max) ? min : max;
  const double d = amax / half;
  const double x = b[i];
  const bool clipped_side = x * signed_max < 0 && std::fabs(x) > (half - 0.5) * d;
  return (clipped_side ? d : d / 2) + half * f16_err(d) + 1e-6 * amax;
}

// q4_1 / q5_1: d = (max - min) / levels and q = round((x - min) / d) in 0..levels, so
// |x - (q d + min)| <= d / 2; fp16 d and m add levels * f16_err(d) + f16_err(min).
double affine_bound(const float* b, int, int levels) {
  double min, max, amax;
  block_min_max(b, min, max, amax);
  const double d = (max - min) / levels;
  return d / 2 + levels * f16_err(d) + f16_err(min) + 1e-6 * amax;
}

TEST(QuantRoundTrip, Q8_0WithinHalfAStep) {
  for (uint32_t seed : {1u, 2u}) {
    print_stats("gauss", DType::Q8_0,
                check_rows(DType::Q8_0, gaussian_data(kRows * kN32, seed), kRows, kN32, 32, q8_0_bound));
    print_stats("mixed", DType::Q8_0,
                check_rows(DType::Q8_0, mixed_data(kRows * kN32, seed), kRows, kN32, 32, q8_0_bound));
  }
}

TEST(QuantRoundTrip, Q4_0WithinHalfAStepExceptTheClippedEnd) {
  auto bound = [](const float* b, int i) { return sym_bound(b, i, 8); };
  for (uint32_t seed : {3u, 4u}) {
    print_stats("gauss", DType::Q4_0,
                check_rows(DType::Q4_0, gaussian_data(kRows * kN32, seed), kRows, kN32, 32, bound));
    print_stats("mixed", DType::Q4_0, check_rows(DType::Q4_0, mixed_data(kRows * kN32, seed), kRows, kN32, 32, bound));
  }
}

TEST(QuantRoundTrip, Q5_0WithinHalfAStepExceptTheClippedEnd) {
  auto bound = [](const float* b, int i) { return sym_bound(b, i, 16); };
  for (uint32_t seed : {5u, 6u}) {
    print_stats("gauss", DType::Q5_0,
                check_rows(DType::Q5_0, gaussian_data(kRows * kN32, seed), kRows, kN32, 32, bound));
    print_stats("mixed", DType::Q5_0, check_rows(DType::Q5_0, mixed_data(kRows * kN32, seed), kRows, kN32, 32, bound));
  }
}

TEST(QuantRoundTrip, Q4_1WithinHalfAStep) {
  auto bound = [](const float* b, int i) { return affine_bound(b, i, 15); };
  for (uint32_t seed : {7u, 8u}) {
    print_stats("gauss", DType::Q4_1,
                check_rows(DType::Q4_1, gaussian_data(kRows * kN32, seed), kRows, kN32, 32, bound));
    print_stats("mixed", DType::Q4_1, check_rows(DType::Q4_1, mixed_data(kRows * kN32, seed), kRows, kN32, 32, bound));
  }
}

TEST(QuantRoundTrip, Q5_1WithinHalfAStep) {
  auto bound = [](const float* b, int i) { return affine_bound(b, i, 31); };
  for (uint32_t seed : {9u, 10u}) {
    print_stats("gauss", DType::Q5_1,
                check_rows(DType::Q5_1, gaussian_data(kRows * kN32, seed), kRows, kN32, 32, bound));
    print_stats("mixed", DType::Q5_1, check_rows(DType::Q5_1, mixed_data(kRows * kN32, seed), kRows, kN32, 32, bound));
  }
}

// f16: round to nearest gives half an ulp, relative 2^-11 (2^-25 absolute among
// subnormals); bf16 has 8 significant bits, so relative 2^-8.
TEST(QuantRoundTrip, F16AndBF16WithinHalfAnUlp) {
  const std::vector<float> x = mixed_data(kRows * kN32, 11);
  const std::vector<float> y16 = dequant(DType::F16, quant(DType::F16, x.data(), x.size()), x.size());
  const std::vector<float> yb = dequant(DType::BF16, quant(DType::BF16, x.data(), x.size()), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::fabs(static_cast<double>(x[i]) - y16[i]), f16_err(x[i])) << i;
    EXPECT_LE(std::fabs(static_cast<double>(x[i]) - yb[i]), std::fabs(x[i]) * 0x1p-8) << i;
  }
}

// ------------------------------------------------------------------ K-quant bounds

// The value grid of one sub-block as stored: lo + q * step for q in 0..levels-1.
struct Grid {
  double lo = 0, step = 0;
  int levels = 0;
};

// Reads each sub-block's grid off the block by dequantizing copies of it whose level bits
// are all 0 and all 1 (the lowest and the highest level). Byte ranges are the format's:
// q4_K qs at 16..143; q5_K qh at 16..47, qs at 48..175; q6_K ql at 0..127, qh at 128..191.
std::vector<Grid> sub_block_grids(DType t, const uint8_t* block) {
  const size_t size = dtype_info(t).type_size;
  const size_t level_begin = t == DType::Q6_K ? 0 : 16;
  const size_t level_end = t == DType::Q4_K ? 144 : t == DType::Q5_K ? 176 : 192;
  const int levels = t == DType::Q4_K ? 16 : t == DType::Q5_K ? 32 : 64;
  const int sub = t == DType::Q6_K ? 16 : 32;
  std::vector<uint8_t> zeros(block, block + size), ones(block, block + size);
  std::fill(zeros.begin() + level_begin, zeros.begin() + level_end, 0x00);
  std::fill(ones.begin() + level_begin, ones.begin() + level_end, 0xFF);
  const std::vector<float> lo = dequant(t, zeros, 256), hi = dequant(t, ones, 256);
  std::vector<Grid> grids;
  for (int e = 0; e < 256; e += sub)
    grids.push_back({lo[e], (static_cast<double>(hi[e]) - lo[e]) / (levels - 1), levels});
  return grids;
}

double distance_to_grid(double x, const Grid& g) {
  if (g.step == 0) return std::fabs(x - g.lo);
  const double q = std::clamp(std::nearbyint((x - g.lo) / g.step), 0.0, g.levels - 1.0);
  return std::fabs(x - (g.lo + q * g.step));
}

// The last step of every K-quantizer re-picks each level against the sub-block scales as
// stored, so each value must be the grid point nearest to x (this is exact given the
// block, whatever the scale fit chose). Returns the largest |error| / super-block amax.
double check_nearest_level(DType t, const std::vector<float>& x, int rows, int64_t n) {
  const size_t size = dtype_info(t).type_size;
  const int sub = t == DType::Q6_K ? 16 : 32;
  double worst = 0;
  for (int r = 0; r < rows; ++r) {
    const float* row = x.data() + r * n;
    const std::vector<uint8_t> q = quant(t, row, n);
    const std::vector<float> y = dequant(t, q, n);
    for (int64_t sb = 0; sb < n / 256; ++sb) {
      const std::vector<Grid> grids = sub_block_grids(t, q.data() + sb * size);
      float amax = 0;
      for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(row[sb * 256 + i]));
      for (int i = 0; i < 256; ++i) {
        const double xi = row[sb * 256 + i], yi = y[sb * 256 + i];
        const Grid& g = grids[i / sub];
        // Float rounding in the quantizer's (x + dm) / d and in dequantization.
        const double slop = 1e-5 * (std::fabs(g.lo) + std::fabs(g.step) * g.levels) + 1e-30;
        const double err = std::fabs(xi - yi);
        EXPECT_LE(err, distance_to_grid(xi, g) + slop)
            << dtype_name(t) << " row " << r << " element " << sb * 256 + i << " x=" << xi << " y=" << yi;
        if (err > distance_to_grid(xi, g) + slop) return worst;
        if (amax > 0) worst = std::max(worst, err / amax);
      }
    }
  }
  return worst;
}

float header_f16(const uint8_t* block, int at) {
  uint16_t h;
  std::memcpy(&h, block + at, 2);
  return f16_to_f32(h);
}

// A bound for q4_K / q5_K from the data and the super-block scales d, dmin alone.
//
// For each sub-block, ggml's fit (make_qkx2_quants) starts from the grid
// step0 = (max - min') / nmax, min' = min(min, 0), which puts every x within step0 / 2
// of a level, and keeps a fit only when it lowers sum w_i e_i^2 with weights
// w_i = av + |x_i| (av = rms of the sub-block). So w_i e_i^2 <= (step0 / 2)^2 sum w and
//   e_i <= step0 / 2 * sqrt(sum w / w_i)     (at most 4 step0, as sum w <= 64 av).
// Storing the fitted scale s and min m as 6-bit multiples of D = max s / 63 and
// Dm = max m / 63 moves them by <= D / 2 + 63 f16_err(D) and Dm / 2 + 63 f16_err(Dm),
// so the fitted levels would now be off by <= nmax * that + that of the min; the final
// re-pick of the nearest level can only do better.
double k_fit_bound(const float* sub, int i, int nmax, float d16, float dmin16) {
  double mn = 0, mx = sub[0], sum_x2 = 0, sum_abs = 0;
  mn = sub[0];
  for (int l = 0; l < 32; ++l) {
    mn = std::min<double>(mn, sub[l]);
    mx = std::max<double>(mx, sub[l]);
    sum_x2 += static_cast<double>(sub[l]) * sub[l];
    sum_abs += std::fabs(sub[l]);
  }
  if (mx == mn && mn == 0) return 0;
  const double av = std::sqrt(sum_x2 / 32);
  const double step0 = (mx - std::min(mn, 0.0)) / nmax;
  const double fit = step0 / 2 * std::sqrt((32 * av + sum_abs) / (av + std::fabs(sub[i])));
  // d16 and dmin16 are D and Dm rounded to fp16; bound D from d16 generously.
  const double d = d16 * (1 + 0x1p-10) + 0x1p-24, dm = dmin16 * (1 + 0x1p-10) + 0x1p-24;
  const double scale_res = nmax * (d / 2 + 63 * f16_err(d)) + dm / 2 + 63 * f16_err(dm);
  return fit + scale_res + 1e-5 * (std::fabs(mx) + std::fabs(mn));
}

Stats check_k_fit_bound(DType t, const std::vector<float>& x, int rows, int64_t n, int nmax) {
  const size_t size = dtype_info(t).type_size;
  Stats s;
  for (int r = 0; r < rows; ++r) {
    const float* row = x.data() + r * n;
    const std::vector<uint8_t> q = quant(t, row, n);
    const std::vector<float> y = dequant(t, q, n);
    for (int64_t sb = 0; sb < n / 256; ++sb) {
      const uint8_t* block = q.data() + sb * size;
      for (int i = 0; i < 256; ++i) {
        const float* sub = row + sb * 256 + i / 32 * 32;
        const double lim = k_fit_bound(sub, i % 32, nmax, header_f16(block, 0), header_f16(block, 2));
        const double err = std::fabs(static_cast<double>(row[sb * 256 + i]) - y[sb * 256 + i]);
        EXPECT_LE(err, lim) << dtype_name(t) << " row " << r << " element " << sb * 256 + i;
        if (err > lim) return s;
        s.max_ratio = std::max(s.max_ratio, lim > 0 ? err / lim : 0.0);
      }
    }
  }
  return s;
}

TEST(QuantRoundTrip, Q4_KPicksNearestLevelAndStaysWithinFitBound) {
  for (uint32_t seed : {12u, 13u}) {
    for (const auto& x : {gaussian_data(kRows * kN256, seed), mixed_data(kRows * kN256, seed)}) {
      const double worst = check_nearest_level(DType::Q4_K, x, kRows, kN256);
      const Stats s = check_k_fit_bound(DType::Q4_K, x, kRows, kN256, 15);
      std::printf("  q4_K  max |err|/super-block amax %.4f, max |err|/fit bound %.3f\n", worst, s.max_ratio);
    }
  }
}

TEST(QuantRoundTrip, Q5_KPicksNearestLevelAndStaysWithinFitBound) {
  for (uint32_t seed : {14u, 15u}) {
    for (const auto& x : {gaussian_data(kRows * kN256, seed), mixed_data(kRows * kN256, seed)}) {
      const double worst = check_nearest_level(DType::Q5_K, x, kRows, kN256);
      const Stats s = check_k_fit_bound(DType::Q5_K, x, kRows, kN256, 31);
      std::printf("  q5_K  max |err|/super-block amax %.4f, max |err|/fit bound %.3f\n", worst, s.max_ratio);
    }
  }
}

// q6_K's fit (make_qx_quants, weights x^2) gives no useful per-element bound for small
// values, so besides the exact nearest-level check the bound here is empirical: 1/32 of
// the super-block's largest |x|, i.e. one step of a sub-block holding that value (observed:
// half of that, 1/64, on gaussian and mixed data).
TEST(QuantRoundTrip, Q6_KPicksNearestLevel) {
  for (uint32_t seed : {16u, 17u}) {
    for (const auto& x : {gaussian_data(kRows * kN256, seed), mixed_data(kRows * kN256, seed)}) {
      const double worst = check_nearest_level(DType::Q6_K, x, kRows, kN256);
      std::printf("  q6_K  max |err|/super-block amax %.4f\n", worst);
      EXPECT_LE(worst, 1.0 / 32);
    }
  }
}

// rmse / rms over gaussian rows. Expected from the step sizes (rmse ~ step / sqrt(12) for a
// uniform grid; steps ~ range / levels of a block of gaussian values): q8_0 ~0.005,
// q4_0/q4_1 ~0.08-0.1, q5_* ~0.04-0.05, q4_K ~0.07, q5_K ~0.035, q6_K ~0.017; ggml's k-quant
// notes give q4_K ~0.1 and q6_K a few times lower. Limits leave ~20% over what is measured.
TEST(QuantRoundTrip, GaussianRmseMatchesTheFormats) {
  struct Case {
    DType t;
    double limit;
  };
  const Case cases[] = {{DType::F16, 0.00025}, {DType::BF16, 0.002}, {DType::Q8_0, 0.0065}, {DType::Q4_0, 0.105},
                        {DType::Q4_1, 0.095},  {DType::Q5_0, 0.052}, {DType::Q5_1, 0.046},  {DType::Q4_K, 0.085},
                        {DType::Q5_K, 0.043},  {DType::Q6_K, 0.0215}};
  const int rows = 7;
  const int64_t n = 4096;
  const std::vector<float> x = gaussian_data(rows * n, 99);
  for (const Case& c : cases) {
    double se = 0, ss = 0, worst = 0;
    for (int r = 0; r < rows; ++r) {
      const float* row = x.data() + r * n;
      const std::vector<float> y = dequant(c.t, quant(c.t, row, n), n);
      for (int64_t i = 0; i < n; ++i) {
        const double e = static_cast<double>(row[i]) - y[i];
        se += e * e;
        ss += static_cast<double>(row[i]) * row[i];
        worst = std::max(worst, std::fabs(e));
      }
    }
    const double ratio = std::sqrt(se / ss);
    std::printf("  %-5s rmse/rms %.5f (limit %.4f), max |err| %.5f (sigma 1)\n", std::string(dtype_name(c.t)).c_str(),
                ratio, c.limit, worst);
    EXPECT_LE(ratio, c.limit) << dtype_name(c.t);
  }
}

// ------------------------------------------------------------------ exact round trips

void expect_exact(DType t, const std::vector<float>& x) {
  const std::vector<float> y = dequant(t, quant(t, x.data(), x.size()), x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]) << dtype_name(t) << " element " << i;
}

// Each block holds the level that fixes d (e.g. 127 d for q8_0) and a spread of other
// levels, with d a power of two so that 1/d and x * (1/d) are exact too.
std::vector<float> levels_times(int blocks, int lo, int hi, int anchor, float d, float offset = 0) {
  std::vector<float> x;
  const int count = hi - lo + 1;
  for (int b = 0; b < blocks; ++b) {
    x.push_back(anchor * d + offset);
    for (int i = 1; i < 32; ++i) x.push_back((lo + (b * 31 + i * 7) % count) * d + offset);
  }
  return x;
}

TEST(QuantRoundTrip, RepresentableValuesAreExact) {
  for (float d : {0.125f, 1.0f, 64.0f}) {
    std::vector<float> q8 = levels_times(16, -127, 127, 127, d);
    for (int b = 1; b < 16; b += 2) q8[b * 32] = -q8[b * 32];  // amax from either sign
    expect_exact(DType::Q8_0, q8);
    expect_exact(DType::Q4_0, levels_times(16, -8, 7, -8, d));
    expect_exact(DType::Q5_0, levels_times(16, -16, 15, -16, d));
  }
  // q4_1 / q5_1: min and min + levels * d both present, so d = (max - min) / levels exactly.
  std::vector<float> q41 = levels_times(16, 0, 15, 0, 0.5f, -3.0f);
  for (int b = 0; b < 16; ++b) q41[b * 32 + 1] = 15 * 0.5f - 3.0f;
  expect_exact(DType::Q4_1, q41);
  std::vector<float> q51 = levels_times(16, 0, 31, 0, 0.25f, 1.25f);
  for (int b = 0; b < 16; ++b) q51[b * 32 + 1] = 31 * 0.25f + 1.25f;
  expect_exact(DType::Q5_1, q51);

  // Every finite f16 and bf16 value.
  std::vector<float> f16s, bf16s;
  for (uint32_t h = 0; h < 65536; ++h) {
    if ((h & 0x7c00) != 0x7c00) f16s.push_back(f16_to_f32(static_cast<uint16_t>(h)));
    if ((h & 0x7f80) != 0x7f80) bf16s.push_back(bf16_to_f32(static_cast<uint16_t>(h)));
  }
  expect_exact(DType::F16, f16s);
  expect_exact(DType::BF16, bf16s);
  expect_exact(DType::F32, mixed_data(256, 21));

  // Zero super-blocks stay zero in the K-quants.
  const std::vector<float> zeros(512, 0.0f);
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) expect_exact(t, zeros);
}

// ------------------------------------------------------------------ same bytes as ggml

// Integer randomness and float operations that IEEE rounds alike everywhere (adds, and
// multiplies by powers of two), so these inputs are the same floats on every platform.
std::vector<float> portable_data(int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  auto u = [&] { return static_cast<float>(g() >> 8) * 0x1p-24f - 0.5f; };
  std::vector<float> x(n);
  for (int64_t b = 0; b < n; b += 32) {
    const float scale = std::ldexp(1.0f, static_cast<int>(g() % 13) - 6);
    const uint32_t kind = g() % 8;
    for (int64_t i = b; i < b + 32; ++i) {
      float v = u();  // a sum of four uniforms: bell-shaped; sequenced, as + would not be
      v += u();
      v += u();
      v += u();
      v *= scale;
      if (kind == 0) v = 0;
      if (kind == 1) v = 0.75f * scale;
      if (kind == 2) v = std::fabs(v) + 0.25f * scale;
      if (g() % 37 == 0) v *= 8;
      x[i] = v;
    }
  }
  return x;
}

uint64_t fnv1a64(const std::vector<uint8_t>& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

// Hashes of what ggml's own quantize_row_*_ref (and ggml_fp32_to_fp16_row,
// ggml_fp32_to_bf16_row_ref), taken from a prebuilt llama.cpp binary, wrote for this input:
// the reference quantizers here must write the very same files as llama.cpp's.
TEST(QuantGolden, SameBytesAsGgmlReferenceQuantizers) {
  struct Case {
    DType t;
    uint64_t hash;
  };
  const Case cases[] = {
      {DType::F16, 0xa4cbb16fc4231dabull},  {DType::BF16, 0x57ffc700d8207c38ull}, {DType::Q8_0, 0xa09e9fd59ed93c7full},
      {DType::Q4_0, 0xeddc8f326a822c1eull}, {DType::Q4_1, 0xdddf7941ee0bc0f5ull}, {DType::Q5_0, 0x278e62bb8321be32ull},
      {DType::Q5_1, 0xccf71d29ed36022full}, {DType::Q4_K, 0xd062f88d8a153ce7ull}, {DType::Q5_K, 0x7040ebae1e01f565ull},
      {DType::Q6_K, 0x340aa9767b191afcull},
  };
  const int64_t n = 256 * 16;
  const std::vector<float> x = portable_data(n, 2024);
  for (const Case& c : cases) EXPECT_EQ(fnv1a64(quant(c.t, x.data(), n)), c.hash) << dtype_name(c.t);
}

// ------------------------------------------------------------------ rows and bad arguments

// A row is its blocks one after another, at any alignment, and a block sees only its own values.
TEST(QuantRow, RowsAreIndependentBlocksAtAnyAlignment) {
  for (DType t : kAllTypes) {
    const int64_t block = dtype_info(t).block_size == 1 ? 32 : dtype_info(t).block_size;
    const int64_t n = 3 * block;
    const size_t bytes = row_bytes(t, n), per_block = row_bytes(t, block);
    const std::vector<float> x = mixed_data(n, 31);
    std::vector<uint8_t> whole = quant(t, x.data(), n);
    std::vector<uint8_t> unaligned(bytes + 1);
    quantize_row(t, x.data(), unaligned.data() + 1, n);
    EXPECT_EQ(0, std::memcmp(whole.data(), unaligned.data() + 1, bytes)) << dtype_name(t);
    for (int b = 0; b < 3; ++b) {
      const std::vector<uint8_t> one = quant(t, x.data() + b * block, block);
      EXPECT_EQ(0, std::memcmp(whole.data() + b * per_block, one.data(), per_block)) << dtype_name(t);
    }
    std::vector<float> y(n), y_unaligned(n + 1);
    dequantize_row(t, whole.data(), y.data(), n);
    dequantize_row(t, unaligned.data() + 1, y_unaligned.data() + 1, n);
    EXPECT_EQ(0, std::memcmp(y.data(), y_unaligned.data() + 1, n * sizeof(float))) << dtype_name(t);
  }
}

// nan and inf in one block must not be undefined behaviour, nor leak into the next block.
TEST(QuantRow, NonFiniteInputStaysInItsBlock) {
  for (DType t : kAllTypes) {
    const int64_t block = dtype_info(t).block_size == 1 ? 32 : dtype_info(t).block_size;
    std::vector<float> x = mixed_data(2 * block, 41);
    x[3] = std::numeric_limits<float>::quiet_NaN();
    x[5] = std::numeric_limits<float>::infinity();
    x[7] = -std::numeric_limits<float>::infinity();
    const std::vector<float> y = dequant(t, quant(t, x.data(), 2 * block), 2 * block);
    const std::vector<float> y2 = dequant(t, quant(t, x.data() + block, block), block);
    EXPECT_EQ(0, std::memcmp(y.data() + block, y2.data(), block * sizeof(float))) << dtype_name(t);
  }
}

TEST(QuantRow, EmptyRowIsFine) {
  for (DType t : kAllTypes) {
    quantize_row(t, nullptr, nullptr, 0);
    dequantize_row(t, nullptr, nullptr, 0);
  }
}

TEST(QuantDeathTest, RejectsPartialBlocks) {
  std::vector<uint8_t> buf(1024);
  std::vector<float> out(512);
  EXPECT_DEATH(dequantize_row(DType::Q4_0, buf.data(), out.data(), 31), "whole number of blocks");
  EXPECT_DEATH(quantize_row(DType::Q6_K, out.data(), buf.data(), 255), "whole number of blocks");
  EXPECT_DEATH(dequantize_row(DType::Q8_0, buf.data(), out.data(), -32), "whole number of blocks");
}

TEST(QuantDeathTest, RejectsTypesWithoutAReferenceQuantizer) {
  std::vector<uint8_t> buf(1024);
  std::vector<float> out(256);
  EXPECT_DEATH(dequantize_row(DType::Q8_1, buf.data(), out.data(), 32), "no reference");
  EXPECT_DEATH(dequantize_row(DType::Q8_K, buf.data(), out.data(), 256), "no reference");
  EXPECT_DEATH(quantize_row(DType::I32, out.data(), buf.data(), 4), "no reference");
  EXPECT_DEATH(dequantize_row(static_cast<DType>(99), buf.data(), out.data(), 4), "no reference");
}

}  // namespace
}  // namespace th
