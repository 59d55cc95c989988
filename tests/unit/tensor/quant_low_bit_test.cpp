// q2_K, q3_K, iq4_nl, iq4_xs against llama.cpp: tests/data/quants/*.bin hold f32 rows, the
// blocks ggml's quantizer wrote for them and ggml's dequantization of those blocks
// (provenance in tests/data/quants/README.md). Both directions must match bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/half.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"

namespace th {
namespace {

struct Vectors {
  std::vector<float> x;      // the input row
  std::vector<uint8_t> q;    // ggml's blocks for it
  std::vector<float> y;      // ggml's dequantization of q
};

// u32 n | f32 x[n] | u32 nbytes | nbytes bytes | f32 y[n], little-endian.
Vectors load(const std::string& name) {
  const std::string path = std::string(TH_SOURCE_DIR) + "/tests/data/quants/" + name + ".bin";
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot open " << path;
  const std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Vectors v;
  if (b.size() < 8) return v;
  size_t at = 0;
  auto u32 = [&] {
    uint32_t x = 0;
    std::memcpy(&x, b.data() + at, 4);
    at += 4;
    return x;
  };
  const uint32_t n = u32();
  if (b.size() < 8 + 8 * size_t{n}) return v;
  v.x.resize(n);
  std::memcpy(v.x.data(), b.data() + at, 4 * size_t{n});
  at += 4 * size_t{n};
  const uint32_t nbytes = u32();
  EXPECT_EQ(b.size(), 8 + 8 * size_t{n} + nbytes) << path;
  if (b.size() != 8 + 8 * size_t{n} + nbytes) return {};
  v.q.assign(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + nbytes));
  at += nbytes;
  v.y.resize(n);
  std::memcpy(v.y.data(), b.data() + at, 4 * size_t{n});
  return v;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

class LowBitVectors : public ::testing::TestWithParam<DType> {};

TEST_P(LowBitVectors, DequantizesAsGgml) {
  const DType t = GetParam();
  std::string name(dtype_name(t));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const Vectors v = load(name);
  ASSERT_FALSE(v.x.empty());
  const auto n = static_cast<int64_t>(v.x.size());
  ASSERT_EQ(row_bytes(t, n), v.q.size());
  std::vector<float> y(v.x.size());
  dequantize_row(t, v.q.data(), y.data(), n);
  int mismatches = 0;
  for (size_t i = 0; i < y.size(); ++i)
    if (bits(y[i]) != bits(v.y[i]) && mismatches++ < 5) ADD_FAILURE() << name << " element " << i << ": " << y[i] << " vs ggml " << v.y[i];
  EXPECT_EQ(mismatches, 0) << name;
}

TEST_P(LowBitVectors, QuantizesAsGgml) {
  const DType t = GetParam();
  std::string name(dtype_name(t));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const Vectors v = load(name);
  ASSERT_FALSE(v.x.empty());
  const auto n = static_cast<int64_t>(v.x.size());
  std::vector<uint8_t> q(row_bytes(t, n));
  quantize_row(t, v.x.data(), q.data(), n);
  const size_t block = dtype_info(t).type_size;
  for (size_t b = 0; b < q.size() / block; ++b)
    EXPECT_EQ(0, std::memcmp(q.data() + b * block, v.q.data() + b * block, block)) << name << " block " << b;
}

INSTANTIATE_TEST_SUITE_P(Types, LowBitVectors, ::testing::Values(DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           std::string s(dtype_name(i.param));
                           for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
                           return s;
                         });

// By hand, one block each: the element layouts documented in quant_blocks.h.
TEST(LowBitByHand, Q2_KLayout) {
  BlockQ2_K b{};
  b.d = 0x3C00;     // 1
  b.dmin = 0x3800;  // 0.5
  b.scales[0] = 0x21;  // sub-block 0: scale 1, min 2
  b.scales[5] = 0x03;  // sub-block 5 (elements 80..95): scale 3, min 0
  b.qs[0] = 0x03;        // element 0: q = 3
  b.qs[16 + 1] = 2 << 4;  // element 128*0 + 32*2 + 17 = 81: q = 2
  float y[256];
  dequantize_row(DType::Q2_K, &b, y, 256);
  EXPECT_EQ(y[0], 3 * 1 - 1.0f);
  EXPECT_EQ(y[1], -1.0f);
  EXPECT_EQ(y[81], 6.0f);
  EXPECT_EQ(y[80], 0.0f);
}

TEST(LowBitByHand, Q3_KLayout) {
  BlockQ3_K b{};
  b.d = 0x3C00;
  // Sub-block 9 (elements 144..159): scale 33 -> 1; low nibble in scales[1] high half, high
  // bits (2) at bits 4-5 of scales[9] (g / 4 = 2).
  b.scales[1] = 0x1 << 4;
  b.scales[9] = 0x2 << 4;
  b.qs[32 + 16] = 1 << 0;  // element 128 + 16 (+32*0) = 144: low bits 1
  b.hmask[16] = 1 << 4;    // element 144: high bit (144 / 32 = 4) -> q = 1 + 4 - 4 = 1
  float y[256];
  dequantize_row(DType::Q3_K, &b, y, 256);
  EXPECT_EQ(y[144], 1.0f);
  EXPECT_EQ(y[145], -4.0f);  // q = 0 without its high bit: 0 - 4
  EXPECT_EQ(y[0], 128.0f);  // sub-block 0: scale 0 - 32, q = 0 - 4
}

TEST(LowBitByHand, IQ4Layouts) {
  BlockIQ4_NL nl{};
  nl.d = 0x4000;  // 2
  nl.qs[3] = 0xF0;  // element 3: level 0 (-127), element 19: level 15 (113)
  float y[256];
  dequantize_row(DType::IQ4_NL, &nl, y, 32);
  EXPECT_EQ(y[3], -254.0f);
  EXPECT_EQ(y[19], 226.0f);
  EXPECT_EQ(y[0], -254.0f);

  BlockIQ4_XS xs{};
  xs.d = 0x3C00;
  // Sub-block 3: ls = 0x5 | 2 << 4 = 37 -> scale 5.
  xs.scales_l[1] = 0x5 << 4;
  xs.scales_h = 2 << 6;
  xs.qs[16 * 3 + 2] = 0x98;  // elements 96 + 2: level 8 (1), 96 + 18: level 9 (13)
  dequantize_row(DType::IQ4_XS, &xs, y, 256);
  EXPECT_EQ(y[98], 5.0f);
  EXPECT_EQ(y[114], 65.0f);
  EXPECT_EQ(y[0], -32.0f * -127);  // ls 0 -> scale -32
}

}  // namespace
}  // namespace th
