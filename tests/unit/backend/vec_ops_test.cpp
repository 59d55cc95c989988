// The per-ISA vector primitives on their own: exp's error bound, conversions
// equal to the reference dequantizer, and matrix rows whose results do not
// depend on the batch around them.
#include "backend/cpu/vec_ops.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tensor/quant.h"

namespace th::cpu {
namespace {

class VecOpsTest : public ::testing::TestWithParam<Isa> {
 protected:
  const VecOps& ops() const { return vec_ops(GetParam()); }
  std::mt19937 rng_{99};
};

TEST_P(VecOpsTest, ExpIsWithinItsStatedBound) {
  std::vector<float> x;
  for (double v = -87.0; v <= 88.0; v += 0.0137) x.push_back(static_cast<float>(v));
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 0.5f, -0.5f, 1.0f, -1.0f}) x.push_back(v);
  std::vector<float> y(x.size());
  ops().exp(x.data(), y.data(), static_cast<int64_t>(x.size()));
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(static_cast<double>(x[i]));
    worst = std::max(worst, std::fabs(y[i] - want) / want);
  }
  EXPECT_LE(worst, kExpMaxRelError) << isa_name(GetParam());
  std::printf("%s exp: worst relative error %.3g\n", std::string(isa_name(GetParam())).c_str(), worst);
  // Far below the range: ~0, never nan or negative.
  std::vector<float> lo = {-100.0f, -1000.0f, -INFINITY}, out(3);
  ops().exp(lo.data(), out.data(), 3);
  for (float v : out) EXPECT_TRUE(v >= 0.0f && v < 1e-37f) << v;
}

// The AVX-512 form is AVX2's on 16 lanes (the same exp polynomial, IEEE division): the same
// bits, at every length's tail.
TEST_P(VecOpsTest, SwigluBitsEqualAvx2s) {
  if (GetParam() != Isa::Avx512) GTEST_SKIP() << "compares the AVX-512 form with the AVX2 one";
  std::normal_distribution<float> normal(0.0f, 6.0f);
  for (int64_t n : {1, 15, 16, 17, 100, 5632}) {
    std::vector<float> g(static_cast<size_t>(n)), u(g.size()), a(g.size()), b(g.size());
    for (size_t i = 0; i < g.size(); ++i) g[i] = normal(rng_), u[i] = normal(rng_);
    g[0] = -100.0f;  // exp past the clamp
    ops().swiglu(g.data(), u.data(), a.data(), n);
    vec_ops(Isa::Avx2).swiglu(g.data(), u.data(), b.data(), n);
    for (size_t i = 0; i < g.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i]))
          << "n " << n << " i " << i << ": " << a[i] << " vs " << b[i];
  }
}

TEST_P(VecOpsTest, ToF32EqualsTheReferenceDequantizerAtAnyOffset) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    const int64_t n = 160;
    std::uniform_real_distribution<float> d(-3, 3);
    std::vector<float> src(n);
    for (float& v : src) v = d(rng_);
    src[3] = 1e-6f;  // an f16 subnormal
    std::vector<uint8_t> row(row_bytes(t, n));
    quantize_row(t, src.data(), row.data(), n);
    std::vector<float> want(n);
    dequantize_row(t, row.data(), want.data(), n);
    for (int64_t start : {0, 1, 5, 31, 32, 33, 64}) {
      for (int64_t len : {1, 7, 8, 9, 32, 40, 96}) {
        if (start + len > n) continue;
        std::vector<float> got(static_cast<size_t>(len), -1.0f);
        ops().to_f32(t, row.data(), start, len, got.data());
        for (int64_t i = 0; i < len; ++i)
          ASSERT_EQ(got[i], want[start + i]) << dtype_name(t) << " start " << start << " len " << len << " i " << i;
      }
    }
  }
  // Whole rows of the other block types go through the reference.
  for (DType t : {DType::Q4_0, DType::Q5_1, DType::Q4_K, DType::Q6_K}) {
    const int64_t n = 512;
    std::vector<float> src(n);
    for (float& v : src) v = std::uniform_real_distribution<float>(-1, 1)(rng_);
    std::vector<uint8_t> row(row_bytes(t, n));
    quantize_row(t, src.data(), row.data(), n);
    std::vector<float> want(n), got(n);
    dequantize_row(t, row.data(), want.data(), n);
    ops().to_f32(t, row.data(), 0, n, got.data());
    ASSERT_EQ(got, want) << dtype_name(t);
  }
}

// The KV cache's f16 rows: the reference quantizer's bytes for every value, ties, subnormals,
// overflow, infinities and NaNs (with payloads) included, in whole vectors and tails.
TEST_P(VecOpsTest, ToF16GivesTheReferenceBytes) {
  const float specials[] = {0.0f, -0.0f, 1e-6f, -6e-8f, 2.98023224e-8f, 5.96046448e-8f, 65504.0f, 65519.0f,
                            65520.0f, -70000.0f, INFINITY, -INFINITY, std::nanf("1"), std::bit_cast<float>(0xffd5a5a5u),
                            std::bit_cast<float>(0x7f812345u), 1.00048828125f, 1.00146484375f};  // last two: ties to even
  std::vector<float> src(203);
  std::uniform_real_distribution<float> d(-4, 4);
  for (float& v : src) v = d(rng_);
  for (size_t i = 0; i < std::size(specials); ++i) src[5 + 11 * i] = specials[i];
  for (int64_t n : {1, 7, 8, 9, 16, 203}) {
    std::vector<uint8_t> want(static_cast<size_t>(2 * n)), got(static_cast<size_t>(2 * n), 0xAB);
    quantize_row(DType::F16, src.data(), want.data(), n);
    ops().to_f16(src.data(), got.data(), n);
    ASSERT_EQ(got, want) << isa_name(GetParam()) << " n " << n;
  }
}

// A token's outputs must be the same bits whether it is alone or in a batch, and whatever
// rows share its call: batched decoding then gives exactly the tokens of decoding alone.
TEST_P(VecOpsTest, GemmRowsDoNotDependOnTheBatch) {
  for (int64_t cols : {5, 8, 16, 67, 256}) {
    const int64_t rows = 11, n_tok = 6;
    std::vector<float> w(rows * cols), x(n_tok * cols);
    for (float& v : w) v = std::uniform_real_distribution<float>(-1, 1)(rng_);
    for (float& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng_);
    std::vector<float> all(n_tok * rows);
    ops().gemm_f32(w.data(), cols, rows, x.data(), cols, n_tok, cols, all.data(), rows);
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        float one;
        ops().gemm_f32(w.data() + r * cols, cols, 1, x.data() + t * cols, cols, 1, cols, &one, 1);
        ASSERT_EQ(one, all[t * rows + r]) << "cols " << cols << " token " << t << " row " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, VecOpsTest, ::testing::ValuesIn(available_isas()),
                         [](const ::testing::TestParamInfo<Isa>& i) { return std::string(isa_name(i.param)); });

}  // namespace
}  // namespace th::cpu
