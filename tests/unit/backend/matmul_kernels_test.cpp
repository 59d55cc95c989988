// The matmul kernel families for Q8_0, Q4_0, IQ4_NL, F32, F16 and BF16 weights, every
// ISA this CPU runs, against plain references computed here:
//  - exact: dequantize_row of the weights and of the converted activations,
//    dotted in double. A kernel accumulates in f32, so it must be within
//    kRelTol of sum |w| |x| of that.
//  - true: the weights against the f32 activations, within the activation
//    quantization error (half a step of each Q8_0 block, plus its fp16 scale's
//    rounding) on top.
//  - generic: every ISA variant agrees with the generic one.
// Shapes are odd on purpose (rows not a multiple of the tile, row ranges not
// starting at 0, activation rows and outputs not contiguous).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/act_q8.h"
#include "backend/cpu/act_q8k.h"
#include "backend/cpu/matmul_kernels.h"
#include "tensor/dtype.h"
#include "tensor/half.h"
#include "tensor/quant.h"

namespace th::cpu {
namespace {

constexpr double kRelTol = 1e-5;

std::string skip_reason(Isa isa) {
  return std::string(isa_name(isa)) +
         " is not available on this CPU (AVX-512 needs F, BW, VL, DQ and VNNI); its variants compile but cannot "
         "run here";
}

struct Case {
  DType weight;
  Isa isa;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return std::string(dtype_name(info.param.weight)) + "_" + std::string(isa_name(info.param.isa));
}

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::IQ4_NL, DType::F32, DType::F16, DType::BF16, DType::FP8_E4M3})
    for (Isa i : {Isa::Generic, Isa::Avx2, Isa::Avx512}) v.push_back({t, i});
  return v;
}

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Values of varied magnitude: most N(0, 1), some blocks scaled up or down by 2^±8, so
// per-block scales differ as they do in real activations.
std::vector<float> random_values(std::mt19937& rng, int64_t n, float scale) {
  std::normal_distribution<float> g(0.0f, scale);
  std::uniform_int_distribution<int> pick(0, 7);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; b += 32) {
    const int p = pick(rng);
    const float s = p == 0 ? 256.0f : p == 1 ? 1.0f / 256 : 1.0f;
    for (int64_t i = b; i < std::min(n, b + 32); ++i) v[i] = g(rng) * s;
  }
  return v;
}

// One product set up with padded strides: W rows, activation rows and outputs all
// further apart than their contents.
struct Problem {
  DType wt, at;
  int64_t rows, cols, n_tokens, r0, r1;
  size_t w_row_bytes, act_row_bytes;
  int64_t y_stride;
  std::vector<uint8_t> w;
  std::vector<float> x;  // f32 activations, n_tokens x cols
  std::vector<uint8_t> act;

  Problem(const MatmulKernel& k, int64_t rows_, int64_t cols_, int64_t n_tokens_, std::mt19937& rng)
      : wt(k.weight), at(k.act), rows(rows_), cols(cols_), n_tokens(n_tokens_) {
    r0 = rows / 3;
    r1 = rows > 3 ? rows - 1 : rows;
    w_row_bytes = row_bytes(wt, cols) + 16;
    act_row_bytes = row_bytes(at, cols) + 64;
    y_stride = rows + 5;
    w.assign(w_row_bytes * rows, 0xAB);
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<float> wf = random_values(rng, cols, 0.05f);
      quantize_row(wt, wf.data(), w.data() + r * w_row_bytes, cols);
    }
    x.resize(static_cast<size_t>(n_tokens * cols));
    act.assign(act_row_bytes * n_tokens, 0xCD);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const std::vector<float> xt = random_values(rng, cols, 1.0f);
      std::copy(xt.begin(), xt.end(), x.begin() + t * cols);
      k.convert_act(xt.data(), act.data() + t * act_row_bytes, cols);
    }
  }

  // k's products; a kernel whose activation format is not this problem's (the generic kernel
  // beside bf16's vdpbf16ps variant) gets the f32 activations converted to its own.
  std::vector<float> run(const MatmulKernel& k) const {
    std::vector<float> y(static_cast<size_t>(n_tokens * y_stride), std::numeric_limits<float>::quiet_NaN());
    if (k.act == at) {
      k.gemm(w.data(), w_row_bytes, cols, r0, r1, act.data(), act_row_bytes, n_tokens, y.data(), y_stride);
      return y;
    }
    const size_t rb = row_bytes(k.act, cols);
    std::vector<uint8_t> own(rb * static_cast<size_t>(n_tokens));
    for (int64_t t = 0; t < n_tokens; ++t) k.convert_act(x.data() + t * cols, own.data() + t * rb, cols);
    k.gemm(w.data(), w_row_bytes, cols, r0, r1, own.data(), rb, n_tokens, y.data(), y_stride);
    return y;
  }

  // k's products on its own packed layout: the activations prepared and rows [r0, r1) packed
  // by k (the rest junk), then its gemm_packed; -1 outside the rows.
  std::vector<float> run_packed(const MatmulKernel& k) const {
    const size_t prb = k.prepared_row_bytes(cols);
    std::vector<uint8_t> prepared(prb * static_cast<size_t>(n_tokens));
    for (int64_t t = 0; t < n_tokens; ++t) k.prepare(act.data() + t * act_row_bytes, cols, prepared.data() + t * prb);
    const size_t stride = packed_row_bytes(k, w_row_bytes);  // the backend's
    std::vector<uint8_t> packed(stride * static_cast<size_t>(r1), 0xEE);
    k.pack_rows(w.data(), w_row_bytes, cols, r0, r1, packed.data(), stride);
    std::vector<float> y(static_cast<size_t>(n_tokens * y_stride), -1.0f);
    k.gemm_packed(packed.data(), stride, cols, r0, r1, prepared.data(), prb, n_tokens, y.data(), y_stride);
    return y;
  }
};

class MatmulKernelTest : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!has_isa(GetParam().isa)) GTEST_SKIP() << skip_reason(GetParam().isa);
    kernel_ = find_matmul_kernel(GetParam().weight, GetParam().isa);
    generic_ = find_matmul_kernel(GetParam().weight, Isa::Generic);
    ASSERT_NE(kernel_, nullptr);
    ASSERT_NE(generic_, nullptr);
  }
  const MatmulKernel* kernel_ = nullptr;
  const MatmulKernel* generic_ = nullptr;
};

TEST_P(MatmulKernelTest, KernelDescribesItself) {
  EXPECT_EQ(kernel_->weight, GetParam().weight);
  EXPECT_EQ(kernel_->isa, GetParam().isa);
  const DType w = GetParam().weight;
  const bool bf16_dot = GetParam().isa == Isa::Avx512 && has_avx512_bf16() &&
                        (w == DType::BF16 || (w == DType::FP8_E4M3 && has_avx512_vbmi()));
  EXPECT_EQ(kernel_->act, bf16_dot                                 ? DType::BF16
                          : is_float(w) || w == DType::FP8_E4M3 ? DType::F32
                                                                   : DType::Q8_0);
  EXPECT_NE(kernel_->convert_act, nullptr);
  EXPECT_NE(kernel_->gemm, nullptr);
}

TEST_P(MatmulKernelTest, MatchesReferenceOnOddShapes) {
  const DType wt = GetParam().weight;
  std::vector<int64_t> col_set = {32, 96, 320, 4096};
  if (is_float(wt)) col_set.insert(col_set.end(), {1, 7, 33, 100});
  std::mt19937 rng(1234 + static_cast<int>(wt) * 7 + static_cast<int>(GetParam().isa));
  for (int64_t rows : {1, 3, 17, 67}) {
    for (int64_t cols : col_set) {
      for (int64_t n_tokens : {1, 2, 3, 5, 8, 13}) {
        SCOPED_TRACE(testing::Message() << "rows " << rows << " cols " << cols << " tokens " << n_tokens);
        const Problem p(*kernel_, rows, cols, n_tokens, rng);
        const std::vector<float> y = p.run(*kernel_);
        const std::vector<float> yg = p.run(*generic_);
        std::vector<float> wf(static_cast<size_t>(cols)), xq(static_cast<size_t>(cols));
        int bad = 0;
        for (int64_t r = 0; r < rows; ++r) {
          dequantize_row(wt, p.w.data() + r * p.w_row_bytes, wf.data(), cols);
          for (int64_t t = 0; t < n_tokens; ++t) {
            const float yv = y[t * p.y_stride + r];
            if (r < p.r0 || r >= p.r1) {
              EXPECT_TRUE(std::isnan(yv)) << "row " << r << " outside [r0, r1) was written";
              continue;
            }
            const float* xt = p.x.data() + t * cols;
            dequantize_row(p.at, p.act.data() + t * p.act_row_bytes, xq.data(), cols);
            double exact = 0, mag = 0, truth = 0, qerr = 0;
            for (int64_t c = 0; c < cols; ++c) {
              exact += static_cast<double>(wf[c]) * xq[c];
              mag += std::fabs(static_cast<double>(wf[c]) * xq[c]);
              truth += static_cast<double>(wf[c]) * xt[c];
            }
            if (p.at == DType::BF16) {
              // Activations rounded to bf16: each within 2^-8 of itself.
              for (int64_t c = 0; c < cols; ++c) qerr += std::ldexp(std::fabs(static_cast<double>(wf[c]) * xt[c]), -8);
            }
            if (p.at == DType::Q8_0) {
              // |x - q d16| <= d / 2 + 127 |d - d16|, with |d - d16| <= 2^-11 d: under 0.57 d per element.
              for (int64_t b = 0; b < cols; b += 32) {
                float amax = 0, wsum = 0;
                for (int64_t c = b; c < b + 32; ++c) {
                  amax = std::max(amax, std::fabs(xt[c]));
                  wsum += std::fabs(wf[c]);
                }
                qerr += 0.57 * amax / 127 * wsum;
              }
            }
            const double tol = kRelTol * mag + 1e-30;
            // Against the generic kernel: its activations may be another format (f32 for bf16's
            // vdpbf16ps variant), so the quantization bound applies between them too.
            const double gtol = 2 * tol + (kernel_->act != generic_->act ? qerr : 0);
            const bool ok = std::fabs(yv - exact) <= tol && std::fabs(yv - truth) <= qerr + 2 * tol &&
                            std::fabs(yv - yg[t * p.y_stride + r]) <= gtol;
            if (!ok && ++bad <= 5) {
              ADD_FAILURE() << "row " << r << " token " << t << ": got " << yv << ", exact " << exact << ", true "
                            << truth << " (quantization bound " << qerr << "), generic " << yg[t * p.y_stride + r]
                            << ", tolerance " << tol;
            }
          }
        }
        // Padding between outputs stays untouched.
        for (int64_t t = 0; t < n_tokens; ++t)
          for (int64_t r = rows; r < p.y_stride; ++r) EXPECT_TRUE(std::isnan(y[t * p.y_stride + r]));
      }
    }
  }
}

// FP8 blocks holding zeros and subnormal codes (exponent field 0), and blocks of tiny scale,
// which the AVX-512 kernel decodes through its tables rather than by shifting bits, mixed
// with blocks of normal codes:
// every product within the kernel's rounding of the exact one.
TEST_P(MatmulKernelTest, Fp8ZeroAndSubnormalCodes) {
  if (GetParam().weight != DType::FP8_E4M3) GTEST_SKIP() << "an fp8 test";
  std::mt19937 rng(5);
  const int64_t cols = 320;
  Problem p(*kernel_, 7, cols, 3, rng);
  const size_t block_bytes = row_bytes(DType::FP8_E4M3, 32);
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t b = 0; b < cols / 32; b += 2) {
      uint8_t* codes = p.w.data() + r * p.w_row_bytes + b * block_bytes + 1;
      for (int i = 0; i < 32; i += 3) codes[i] = static_cast<uint8_t>((i % 8) | (i % 2 ? 0x80 : 0));
      // And blocks of normal codes with the smallest scales (2^-126 .. 2^-120), whose products
      // the AVX-512 kernel keeps out of bf16's subnormal range by taking its tables instead.
      if (b + 1 < cols / 32 && r % 2 == 0) codes[block_bytes - 1] = static_cast<uint8_t>(1 + (b / 2 + r) % 7);
    }
  const std::vector<float> y = p.run(*kernel_);
  std::vector<float> wf(static_cast<size_t>(cols)), xq(static_cast<size_t>(cols));
  for (int64_t r = p.r0; r < p.r1; ++r) {
    dequantize_row(DType::FP8_E4M3, p.w.data() + r * p.w_row_bytes, wf.data(), cols);
    for (int64_t t = 0; t < p.n_tokens; ++t) {
      dequantize_row(p.at, p.act.data() + t * p.act_row_bytes, xq.data(), cols);
      double exact = 0, mag = 0;
      for (int64_t c = 0; c < cols; ++c) {
        exact += static_cast<double>(wf[c]) * xq[c];
        mag += std::fabs(static_cast<double>(wf[c]) * xq[c]);
      }
      EXPECT_NEAR(y[t * p.y_stride + r], exact, kRelTol * mag + 1e-30) << "row " << r << " token " << t;
    }
  }
}

TEST_P(MatmulKernelTest, EmptyRangeWritesNothing) {
  std::mt19937 rng(7);
  const int64_t cols = is_float(GetParam().weight) ? 40 : 64;
  const Problem p(*kernel_, 4, cols, 3, rng);
  std::vector<float> y(static_cast<size_t>(3 * p.y_stride), -1.0f);
  kernel_->gemm(p.w.data(), p.w_row_bytes, cols, 2, 2, p.act.data(), p.act_row_bytes, 3, y.data(), p.y_stride);
  for (float v : y) EXPECT_EQ(v, -1.0f);
}

// The prepare hook (optional, all three functions or none): preparing the rows once and
// running gemm_prepared on them gives gemm's results bit for bit, and so do packed weights
// (pack_rows, gemm_packed), on odd shapes, row
// ranges not starting at 0, prepared rows further apart than their contents, and token
// counts on both sides of the tile and of a token panel.
TEST_P(MatmulKernelTest, PreparedPathMatchesGemm) {
  const MatmulKernel& k = *kernel_;
  const bool any = k.prepared_row_bytes || k.prepare || k.gemm_prepared;
  const bool all = k.prepared_row_bytes && k.prepare && k.gemm_prepared;
  ASSERT_EQ(any, all) << "a kernel has all three prepare functions or none";
  ASSERT_EQ(k.pack_rows != nullptr, k.gemm_packed != nullptr) << "a kernel packs weights with both functions or none";
  ASSERT_TRUE(k.pack_rows == nullptr || all) << "packed weights come with the prepare step";
  if (!all) GTEST_SKIP() << "this kernel has no prepare step";
  std::mt19937 rng(11);
  for (int64_t rows : {1, 9, 70}) {
    for (int64_t cols : {32, 96, 160, 544, 2048 + 96}) {
      for (int64_t n_tokens : {1, 3, 5, 8, 9, 32, 75}) {
        SCOPED_TRACE(testing::Message() << "rows " << rows << " cols " << cols << " tokens " << n_tokens);
        const Problem p(k, rows, cols, n_tokens, rng);
        const size_t prb = k.prepared_row_bytes(cols) + 96;
        std::vector<uint8_t> prepared(prb * static_cast<size_t>(n_tokens), 0xEE);
        for (int64_t t = 0; t < n_tokens; ++t)
          k.prepare(p.act.data() + t * p.act_row_bytes, cols, prepared.data() + t * prb);
        std::vector<float> y(static_cast<size_t>(n_tokens * p.y_stride), std::numeric_limits<float>::quiet_NaN());
        k.gemm_prepared(p.w.data(), p.w_row_bytes, cols, p.r0, p.r1, prepared.data(), prb, n_tokens, y.data(),
                        p.y_stride);
        const std::vector<float> want = p.run(k);
        int bad = 0;
        for (size_t i = 0; i < y.size(); ++i) {
          const bool same = std::isnan(want[i]) ? std::isnan(y[i]) : y[i] == want[i];
          if (!same && ++bad <= 5) ADD_FAILURE() << "element " << i << ": " << y[i] << " vs gemm " << want[i];
        }
        if (!k.pack_rows) continue;
        // Packed weights (only the rows in range are packed; the rest of the copy is junk the
        // kernel must not read), rows further apart than the backend's stride: gemm's results
        // again, bit for bit.
        const size_t stride = packed_row_bytes(k, p.w_row_bytes) + 64;
        std::vector<uint8_t> packed(stride * static_cast<size_t>(p.r1), 0xEE);
        k.pack_rows(p.w.data(), p.w_row_bytes, cols, p.r0, p.r1, packed.data(), stride);
        std::vector<float> yp(y.size(), std::numeric_limits<float>::quiet_NaN());
        k.gemm_packed(packed.data(), stride, cols, p.r0, p.r1, prepared.data(), prb, n_tokens, yp.data(), p.y_stride);
        for (size_t i = 0; i < yp.size(); ++i) {
          const bool same = std::isnan(want[i]) ? std::isnan(yp[i]) : yp[i] == want[i];
          if (!same && ++bad <= 5) ADD_FAILURE() << "packed, element " << i << ": " << yp[i] << " vs gemm " << want[i];
        }
      }
    }
  }
}

// convert_act writes exactly what the reference does: quantize_row(Q8_0) for the
// integer families (ties, nan, inf, subnormal and overflowing scales included) and
// the row itself for the float ones.
TEST_P(MatmulKernelTest, ConvertActMatchesReferenceBytes) {
  const MatmulKernel& k = *kernel_;
  std::mt19937 rng(99);
  std::vector<std::vector<float>> rows;
  for (int64_t n : {32, 64, 4096}) rows.push_back(random_values(rng, n, 1.0f));
  // Ties: with amax 127, d = 1 and x * id = x, so x.5 must round away from zero.
  std::vector<float> ties(32);
  for (int i = 0; i < 32; ++i) ties[i] = (i % 2 ? -1.0f : 1.0f) * (static_cast<float>(i) + 0.5f);
  ties[31] = 127.0f;
  rows.push_back(ties);
  // Just under a tie, where adding 0.5 and truncating would go wrong.
  std::vector<float> under(32, 0.49999997f);
  under[0] = 127.0f;
  under[1] = -0.49999997f;
  rows.push_back(under);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> special(32 * 6, 0.0f);  // block 0: all zero
  special[32] = nan;                          // block 1: a nan among normal values
  for (int i = 33; i < 64; ++i) special[i] = 0.1f * i;
  special[64] = inf;  // block 2: an inf
  special[65] = -3.0f;
  for (int i = 96; i < 128; ++i) special[i] = 1e-41f * (i - 100);   // block 3: subnormal f32
  for (int i = 128; i < 160; ++i) special[i] = 1e10f * (i - 140);   // block 4: scale past f16's range
  for (int i = 160; i < 192; ++i) special[i] = 3e-6f * (i - 170);  // block 5: f16-subnormal scale
  rows.push_back(special);
  for (const std::vector<float>& x : rows) {
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> want(row_bytes(k.act, n)), got(row_bytes(k.act, n), 0x5A);
    quantize_row(k.act, x.data(), want.data(), n);
    k.convert_act(x.data(), got.data(), n);
    for (size_t i = 0; i < want.size(); ++i) {
      if (want[i] != got[i]) {
        ADD_FAILURE() << "n " << n << ": byte " << i << " is " << int{got[i]} << ", reference " << int{want[i]};
        break;
      }
    }
  }
}

// Large gemms against the generic variant: rows of 14336 columns (the widest Llama
// FFN: several column chunks), and many rows and tokens (several row panels and token
// panels, with a partial last group of blocks).
void expect_agrees_with_generic(const MatmulKernel& kernel, const MatmulKernel& generic, int64_t rows, int64_t cols,
                                int64_t n_tokens) {
  std::mt19937 rng(5);
  const Problem p(kernel, rows, cols, n_tokens, rng);
  const std::vector<float> y = p.run(kernel), yg = p.run(generic);
  std::vector<float> wf(static_cast<size_t>(cols)), xq(static_cast<size_t>(cols));
  int bad = 0;
  for (int64_t r = p.r0; r < p.r1; ++r) {
    dequantize_row(p.wt, p.w.data() + r * p.w_row_bytes, wf.data(), p.cols);
    for (int64_t t = 0; t < p.n_tokens; ++t) {
      dequantize_row(p.at, p.act.data() + t * p.act_row_bytes, xq.data(), p.cols);
      double mag = 0;
      for (int64_t c = 0; c < p.cols; ++c) mag += std::fabs(static_cast<double>(wf[c]) * xq[c]);
      const float a = y[t * p.y_stride + r], b = yg[t * p.y_stride + r];
      const double act_err = kernel.act != generic.act ? std::ldexp(mag, -8) : 0;  // bf16 activations
      if (!(std::fabs(a - b) <= 2 * kRelTol * mag + act_err) && ++bad <= 5)
        ADD_FAILURE() << "row " << r << " token " << t << ": " << a << " vs generic " << b << " (sum |w x| " << mag << ")";
    }
  }
}

TEST_P(MatmulKernelTest, AgreesWithGenericOnManyRowsAndTokens) {
  expect_agrees_with_generic(*kernel_, *generic_, 150, 4096 + 96, 75);
}

TEST_P(MatmulKernelTest, AgreesWithGenericOnWideRows) {
  std::mt19937 rng(5);
  const Problem p(*kernel_, 9, 14336, 17, rng);
  const std::vector<float> y = p.run(*kernel_), yg = p.run(*generic_);
  std::vector<float> wf(14336), xq(14336);
  for (int64_t r = p.r0; r < p.r1; ++r) {
    dequantize_row(p.wt, p.w.data() + r * p.w_row_bytes, wf.data(), p.cols);
    for (int64_t t = 0; t < p.n_tokens; ++t) {
      dequantize_row(p.at, p.act.data() + t * p.act_row_bytes, xq.data(), p.cols);
      double mag = 0;
      for (int64_t c = 0; c < p.cols; ++c) mag += std::fabs(static_cast<double>(wf[c]) * xq[c]);
      const double act_err = kernel_->act != generic_->act ? std::ldexp(mag, -8) : 0;  // bf16 activations
      EXPECT_NEAR(y[t * p.y_stride + r], yg[t * p.y_stride + r], 2 * kRelTol * mag + act_err)
          << "row " << r << " token " << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Matmul, MatmulKernelTest, testing::ValuesIn(all_cases()), case_name);

TEST(MatmulRegistry, EveryFamilyHasEveryIsa) {
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::IQ4_NL, DType::F32, DType::F16, DType::BF16, DType::Q2_K,
                  DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS, DType::FP8_E4M3})
    for (Isa i : {Isa::Generic, Isa::Avx2, Isa::Avx512}) EXPECT_NE(find_matmul_kernel(t, i), nullptr) << dtype_name(t);
}

// Issue #16: the AVX-512 Q4_0/Q8_0 kernels once had a driver of their own without the
// prepare step, redoing the activation pass in every chunk of rows, and decoded at half the
// AVX2 speed. Where a family's AVX2 variant prepares its activations, the AVX-512 one must
// too (both run act_q8_groups.h).
TEST(MatmulRegistry, Avx512PreparesWhereAvx2Does) {
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::IQ4_NL, DType::F32, DType::F16, DType::BF16, DType::Q2_K,
                  DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS}) {
    const MatmulKernel* avx2 = find_matmul_kernel(t, Isa::Avx2);
    const MatmulKernel* avx512 = find_matmul_kernel(t, Isa::Avx512);
    ASSERT_NE(avx2, nullptr) << dtype_name(t);
    ASSERT_NE(avx512, nullptr) << dtype_name(t);
    if (avx2->prepare) {  // q4_K, q6_K prepare on AVX-512 alone
      EXPECT_NE(avx512->prepare, nullptr) << dtype_name(t);
    }
    if (avx512->prepare) {
      EXPECT_NE(avx512->prepared_row_bytes, nullptr) << dtype_name(t);
      EXPECT_NE(avx512->gemm_prepared, nullptr) << dtype_name(t);
    }
  }
}

// Where the CPU has VBMI, find_matmul_kernel gives IQ4_NL's vpermb variant, so the suite
// above no longer runs the plain AVX-512 one here: both must give the same bits on packed
// weights (the same integer sums, the same float steps), odd shapes and token counts.
TEST(MatmulRegistry, Iq4NlVbmiMatchesPlainAvx512) {
  if (!has_avx512_vbmi()) GTEST_SKIP() << "this CPU lacks AVX-512 VBMI";
  const MatmulKernel& plain = kMatmulIQ4_NLAvx512;
  const MatmulKernel& vbmi = kMatmulIQ4_NLAvx512Vbmi;
  ASSERT_EQ(find_matmul_kernel(DType::IQ4_NL, Isa::Avx512)->gemm_packed, vbmi.gemm_packed);
  std::mt19937 rng(23);
  for (int64_t cols : {288, 2048 + 96})
    for (int64_t n_tokens : {1, 3, 9}) {
      SCOPED_TRACE(testing::Message() << "cols " << cols << " tokens " << n_tokens);
      const Problem p(plain, 37, cols, n_tokens, rng);
      const std::vector<float> y[2] = {p.run_packed(plain), p.run_packed(vbmi)};
      EXPECT_EQ(y[0], y[1]);
      const std::vector<float> want = p.run(plain);  // the file's layout's, bit for bit (NaN outside the rows)
      for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t r = p.r0; r < p.r1; ++r) ASSERT_EQ(y[0][t * p.y_stride + r], want[t * p.y_stride + r]);
    }
}

// Where the CPU has GFNI, find_matmul_kernel gives q2_K's, q3_K's and q6_K's GFNI variants
// (their bit fields unpacked by vgf2p8affineqb) and IQ4_XS's VBMI one (levels by vpermb; GFNI
// here implies VBMI), so the suites above no longer run the plain AVX-512 ones here: on packed
// weights both must give the same bits, for one token (q2_K's pairs of super-blocks and an odd
// last one), a few (inline scales) and a batch.
TEST(MatmulRegistry, KQuantGfniMatchesPlainAvx512) {
  if (!has_avx512_gfni()) GTEST_SKIP() << "this CPU lacks GFNI on AVX-512";
  using WithGroups = MatmulKernel (*)(MatmulKernel);
  const struct {
    DType type;
    WithGroups plain, gfni;
  } families[] = {{DType::Q2_K, with_q2_k_groups_avx512, with_q2_k_groups_avx512gfni},
                  {DType::Q3_K, with_q3_k_groups_avx512, with_q3_k_groups_avx512gfni},
                  {DType::Q6_K, with_q6_k_groups_avx512, with_q6_k_groups_avx512gfni},
                  {DType::IQ4_XS, with_iq4_xs_groups_avx512, with_iq4_xs_groups_avx512vbmi}};
  std::mt19937 rng(29);
  for (const auto& [type, plain, gfni] : families) {
    const MatmulKernel& file_layout = *find_matmul_kernel(type, Isa::Avx512);
    const MatmulKernel variants[2] = {plain(file_layout), gfni(file_layout)};
    ASSERT_EQ(file_layout.gemm_packed, variants[1].gemm_packed);
    ASSERT_NE(variants[0].gemm_packed, variants[1].gemm_packed);
    for (int64_t cols : {3 * 256, 9 * 256})
      for (int64_t n_tokens : {1, 3, 9}) {
        SCOPED_TRACE(testing::Message() << dtype_name(type) << " cols " << cols << " tokens " << n_tokens);
        const Problem p(file_layout, 37, cols, n_tokens, rng);
        const std::vector<float> y[2] = {p.run_packed(variants[0]), p.run_packed(variants[1])};
        EXPECT_EQ(y[0], y[1]);
        // And near the file's layout (a few ulps of sum |w x|: the packed path scales lanes).
        const std::vector<float> want = p.run(file_layout);
        for (int64_t t = 0; t < n_tokens; ++t)
          for (int64_t r = p.r0; r < p.r1; ++r) {
            const float v = y[1][t * p.y_stride + r], ref = want[t * p.y_stride + r];
            ASSERT_NEAR(v, ref, 1e-4f * (1.0f + std::fabs(ref))) << "row " << r << " token " << t;
          }
      }
  }
}

TEST(MatmulRegistry, GenericIsAlwaysAvailable) {
  ASSERT_FALSE(available_isas().empty());
  EXPECT_EQ(available_isas().front(), Isa::Generic);
  EXPECT_TRUE(has_isa(best_isa()));
}

// The few-token tiles' weight-stream prefetch (tile_table.h): `prefetchnta` where it was
// measured faster (Zen 5, AMD family 0x1A), `prefetcht1` on every other CPU.
TEST(StreamPrefetch, NtaOnAmdFamily1AAndLaterOnly) {
  EXPECT_EQ(default_stream_prefetch(true, 0x1a), StreamPrefetch::Nta);   // Zen 5
  EXPECT_EQ(default_stream_prefetch(true, 0x1b), StreamPrefetch::Nta);
  EXPECT_EQ(default_stream_prefetch(true, 0x19), StreamPrefetch::L2);    // Zen 3, Zen 4
  EXPECT_EQ(default_stream_prefetch(true, 0x17), StreamPrefetch::L2);    // Zen 1, Zen 2
  EXPECT_EQ(default_stream_prefetch(false, 0x1a), StreamPrefetch::L2);  // not AMD
  EXPECT_EQ(default_stream_prefetch(false, 6), StreamPrefetch::L2);     // Intel
}

TEST(StreamPrefetch, OverrideNamesOneOrIsReported) {
  std::string error;
  EXPECT_EQ(parse_stream_prefetch(nullptr, StreamPrefetch::Nta, &error), StreamPrefetch::Nta);
  EXPECT_EQ(parse_stream_prefetch("", StreamPrefetch::L2, &error), StreamPrefetch::L2);
  EXPECT_EQ(parse_stream_prefetch("nta", StreamPrefetch::L2, &error), StreamPrefetch::Nta);
  EXPECT_EQ(parse_stream_prefetch("l2", StreamPrefetch::Nta, &error), StreamPrefetch::L2);
  EXPECT_TRUE(error.empty());
  EXPECT_EQ(parse_stream_prefetch("NTA ", StreamPrefetch::L2, &error), StreamPrefetch::L2);
  EXPECT_EQ(error, "TOKENHIVE_STREAM_PREFETCH=NTA : not l2 or nta; using l2");
  EXPECT_EQ(g_stream_prefetch_nta, stream_prefetch() == StreamPrefetch::Nta);
  EXPECT_EQ(stream_prefetch_name(StreamPrefetch::Nta), "nta");
  EXPECT_EQ(stream_prefetch_name(StreamPrefetch::L2), "l2");
}

}  // namespace
}  // namespace th::cpu
