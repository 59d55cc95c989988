// The Q8_K-activation kernel families (q2_K, q3_K, q4_K, q5_K, q6_K, iq4_xs) against plain
// references: the Q8_K conversion byte for byte, and every registered ISA variant's gemm
// on odd shapes, row ranges and strides against double-precision dot products.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/cpu/act_q8k.h"
#include "backend/cpu/matmul_kernels.h"
#include "tensor/dtype.h"
#include "tensor/half.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"

namespace th::cpu {
namespace {

constexpr size_t kQ8K = sizeof(BlockQ8_K);

BlockQ8_K block_at(const std::vector<uint8_t>& bytes, size_t i) {
  BlockQ8_K b;
  std::memcpy(&b, bytes.data() + i * kQ8K, kQ8K);
  return b;
}

// Blocks that probe every branch of the conversion: ordinary data at several scales,
// ties between +max and -max in both orders, zeros, NaN, inf, denormals.
std::vector<float> tricky_rows(int n_blocks, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(n_blocks) * kQKK);
  for (int b = 0; b < n_blocks; ++b) {
    float* blk = x.data() + static_cast<size_t>(b) * kQKK;
    const float scale = std::pow(10.0f, static_cast<float>(b % 9) - 4);
    for (int j = 0; j < kQKK; ++j) blk[j] = normal(rng) * scale;
    switch (b % 12) {
      case 1: blk[17] = 50 * scale; blk[200] = -50 * scale; break;   // tie, + first
      case 2: blk[3] = -50 * scale; blk[255] = 50 * scale; break;    // tie, - first
      case 3: std::fill(blk, blk + kQKK, 0.0f); break;
      case 4: blk[99] = std::numeric_limits<float>::quiet_NaN(); break;
      case 5: std::fill(blk, blk + kQKK, std::numeric_limits<float>::quiet_NaN()); break;
      case 6: blk[7] = std::numeric_limits<float>::infinity(); break;
      case 7: for (int j = 0; j < kQKK; ++j) blk[j] = normal(rng) * 1e-40f; break;  // denormal max
      case 8: for (int j = 0; j < kQKK; ++j) blk[j] = std::round(normal(rng) * 4) * 0.5f; break;  // exact halves
      case 9: std::fill(blk, blk + kQKK, -0.0f); blk[128] = -3.0f; break;
      default: break;
    }
  }
  return x;
}

TEST(MatmulKQ8K, ReferenceFollowsGgml) {
  std::vector<float> x(kQKK, 0.0f);
  x[10] = 2.0f;
  x[20] = -2.0f;  // tie: the first (+2) is the max, so d = 2 / -127 and x[10] -> -127
  x[30] = 1.0f;
  x[40] = 0.5f * 2.0f / 127.0f;  // exactly half a step: rounds to even (0)
  std::vector<uint8_t> out(kQ8K);
  quantize_row_q8_k_ref(x.data(), out.data(), kQKK);
  const BlockQ8_K b = block_at(out, 0);
  EXPECT_FLOAT_EQ(b.d, 1 / (-127.f / 2.0f));
  EXPECT_EQ(b.qs[10], -127);
  EXPECT_EQ(b.qs[20], 127);
  EXPECT_EQ(b.qs[30], static_cast<int>(std::nearbyint(-127.f / 2.0f * 1.0f)));
  EXPECT_EQ(b.qs[40], 0);
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int l = 0; l < 16; ++l) sum += b.qs[16 * g + l];
    EXPECT_EQ(b.bsums[g], sum) << g;
  }

  std::fill(x.begin(), x.end(), 0.0f);
  std::fill(out.begin(), out.end(), 0xAB);
  quantize_row_q8_k_ref(x.data(), out.data(), kQKK);
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint8_t v) { return v == 0; })) << "zero block: all bytes 0";
}

// quantize's bytes against the reference's on tricky_rows (ties, NaNs, infs, zero and
// denormal blocks).
void expect_reference_bytes(void (*quantize)(const float*, void*, int64_t)) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const int n_blocks = 24;
    const std::vector<float> x = tricky_rows(n_blocks, seed);
    std::vector<uint8_t> ref(n_blocks * kQ8K, 0x11), simd(n_blocks * kQ8K, 0x22);
    quantize_row_q8_k_ref(x.data(), ref.data(), static_cast<int64_t>(x.size()));
    quantize(x.data(), simd.data(), static_cast<int64_t>(x.size()));
    for (int b = 0; b < n_blocks; ++b) {
      const BlockQ8_K r = block_at(ref, b), s = block_at(simd, b);
      EXPECT_EQ(std::memcmp(&r.d, &s.d, 4), 0) << "seed " << seed << " block " << b << ": d " << r.d << " vs " << s.d;
      EXPECT_EQ(std::memcmp(r.qs, s.qs, sizeof r.qs), 0) << "seed " << seed << " block " << b << ": qs";
      EXPECT_EQ(std::memcmp(r.bsums, s.bsums, sizeof r.bsums), 0) << "seed " << seed << " block " << b << ": bsums";
    }
  }
}

TEST(MatmulKQ8K, Avx2BytesMatchReference) {
  if (!has_isa(Isa::Avx2)) GTEST_SKIP() << "CPU lacks AVX2";
  expect_reference_bytes(quantize_row_q8_k_avx2);
}

TEST(MatmulKQ8K, Avx512BytesMatchReference) {
  if (!has_isa(Isa::Avx512)) GTEST_SKIP() << "CPU lacks AVX-512";
  expect_reference_bytes(quantize_row_q8_k_avx512);
}

TEST(MatmulKQ8K, RoundTripWithinHalfAStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  const int n = 64 * kQKK;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = normal(rng) * std::pow(10.0f, static_cast<float>(i / kQKK % 7) - 3);
  std::vector<uint8_t> q(row_bytes(DType::Q8_K, n));
  quantize_row_q8_k_ref(x.data(), q.data(), n);
  dequantize_row_q8_k(q.data(), y.data(), n);
  for (int b = 0; b < n / kQKK; ++b) {
    const float d = std::fabs(block_at(q, b).d);
    float amax = 0;
    for (int j = 0; j < kQKK; ++j) amax = std::max(amax, std::fabs(x[b * kQKK + j]));
    EXPECT_NEAR(d, amax / 127, amax * 1e-6f) << b;
    for (int j = 0; j < kQKK; ++j) {
      const int i = b * kQKK + j;
      ASSERT_LE(std::fabs(x[i] - y[i]), 0.5f * d * (1 + 1e-5f) + amax * 1e-7f) << "element " << i;
    }
  }
}

// ---------------------------------------------------------------- gemm

struct KQuantCase {
  DType type;
  Isa isa;
};

void PrintTo(const KQuantCase& c, std::ostream* os) { *os << dtype_name(c.type) << "/" << isa_name(c.isa); }

std::string kquant_case_name(const testing::TestParamInfo<KQuantCase>& info) {
  return std::string(dtype_name(info.param.type)) + "_" + std::string(isa_name(info.param.isa));
}

class MatmulKQuant : public testing::TestWithParam<KQuantCase> {
 protected:
  const MatmulKernel* kernel() {
    const KQuantCase c = GetParam();
    const MatmulKernel* k = find_matmul_kernel(c.type, c.isa);
    EXPECT_NE(k, nullptr) << dtype_name(c.type) << " " << isa_name(c.isa) << " is not registered";
    return k;
  }
  bool skip() {
    return !has_isa(GetParam().isa);
  }
};

// Weights of `rows` rows, each row_bytes + pad apart (pad makes rows unaligned).
struct Weights {
  std::vector<uint8_t> bytes;
  size_t stride;
  std::vector<double> dq;  // dequantized, rows x cols
};

Weights make_weights(DType t, int64_t rows, int64_t cols, size_t pad, std::mt19937& rng, bool random_bits) {
  Weights w;
  w.stride = row_bytes(t, cols) + pad;
  w.bytes.assign(rows * w.stride + 1, 0);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<float> x(cols), y(cols);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = w.bytes.data() + r * w.stride;
    if (random_bits) {
      // Every level, scale and min pattern the format can hold (q6_K scales down to -128),
      // with sane fp16 d / dmin.
      for (size_t i = 0; i < row_bytes(t, cols); ++i) row[i] = static_cast<uint8_t>(byte(rng));
      const size_t block = dtype_info(t).type_size;
      for (int64_t b = 0; b < cols / kQKK; ++b) {
        uint8_t* blk = row + b * block;
        const uint16_t d = f32_to_f16(0.01f * (1 + byte(rng) / 64.0f));
        const uint16_t dmin = f32_to_f16(0.005f * (byte(rng) / 64.0f));
        if (t == DType::Q6_K) {
          std::memcpy(blk + offsetof(BlockQ6_K, d), &d, 2);
        } else if (t == DType::Q3_K) {
          std::memcpy(blk + offsetof(BlockQ3_K, d), &d, 2);
        } else if (t == DType::Q2_K) {
          std::memcpy(blk + offsetof(BlockQ2_K, d), &d, 2);
          std::memcpy(blk + offsetof(BlockQ2_K, dmin), &dmin, 2);
        } else if (t == DType::IQ4_XS) {
          std::memcpy(blk + offsetof(BlockIQ4_XS, d), &d, 2);  // scales_h stays random
        } else {
          std::memcpy(blk, &d, 2);
          std::memcpy(blk + 2, &dmin, 2);
        }
      }
    } else {
      // Rows with an offset (so q4_K/q5_K need their mins) and some with spread-out scales.
      const float offset = (r % 3 == 0) ? 0.0f : normal(rng);
      for (int64_t c = 0; c < cols; ++c) x[c] = offset + normal(rng) * (1 + (c / 32 % 5));
      quantize_row(t, x.data(), row, cols);
    }
    dequantize_row(t, row, y.data(), cols);
    for (int64_t c = 0; c < cols; ++c) w.dq.push_back(y[c]);
  }
  return w;
}

struct Acts {
  std::vector<float> x;     // n x cols, f32
  std::vector<uint8_t> q;   // n rows of Q8_K, stride apart
  size_t stride;
  std::vector<double> dq;   // dequantized, n x cols
  std::vector<double> half_step;  // per element: |d| / 2 of its block
};

Acts make_acts(const MatmulKernel& k, int64_t n, int64_t cols, size_t pad, std::mt19937& rng, bool saturate) {
  Acts a;
  std::normal_distribution<float> normal;
  a.x.resize(n * cols);
  for (int64_t i = 0; i < n * cols; ++i) {
    const float scale = std::pow(4.0f, static_cast<float>(i / kQKK % 5) - 2);
    a.x[i] = saturate ? ((i * 7 + i / 3) % 2 ? 1.0f : -1.0f) : normal(rng) * scale;
  }
  if (!saturate && n * cols >= 2 * kQKK)
    std::fill(a.x.begin() + kQKK, a.x.begin() + 2 * kQKK, 0.0f);  // one all-zero block: d = 0
  a.stride = row_bytes(DType::Q8_K, cols) + pad;
  a.q.assign(n * a.stride + 1, 0);
  std::vector<float> y(cols);
  for (int64_t t = 0; t < n; ++t) {
    uint8_t* row = a.q.data() + t * a.stride;
    k.convert_act(a.x.data() + t * cols, row, cols);
    dequantize_row_q8_k(row, y.data(), cols);
    for (int64_t c = 0; c < cols; ++c) {
      a.dq.push_back(y[c]);
      float d;
      std::memcpy(&d, row + (c / kQKK) * kQ8K, 4);
      a.half_step.push_back(0.5 * std::fabs(d));
    }
  }
  return a;
}

// Runs the kernel on rows [r0, r0 + rows) into a y of stride y_stride filled with a sentinel;
// returns y.
std::vector<float> run(const MatmulKernel& k, const Weights& w, int64_t cols, int64_t r0, int64_t rows, const Acts& a,
                       int64_t n, int64_t y_stride) {
  std::vector<float> y(n * y_stride, -12345.0f);
  k.gemm(w.bytes.data(), w.stride, cols, r0, r0 + rows, a.q.data(), a.stride, n, y.data(), y_stride);
  return y;
}

// Checks one gemm result: against the exact dot product of the quantized operands, against
// the f32-activation product within the activation rounding bound, and (when given)
// against another variant's y; cells outside [r0, r0 + rows) must keep the sentinel.
void check(const std::string& what, const std::vector<float>& y, const Weights& w, const Acts& a, int64_t cols,
           int64_t r0, int64_t rows, int64_t n, int64_t y_stride, const std::vector<float>* other) {
  int failures = 0;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < y_stride; ++r) {
      const float got = y[t * y_stride + r];
      if (r < r0 || r >= r0 + rows) {
        if (got != -12345.0f && ++failures < 5) ADD_FAILURE() << what << ": wrote outside the row range at r " << r;
        continue;
      }
      double exact = 0, truth = 0, mag = 0, bound = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double wv = w.dq[r * cols + c];
        exact += wv * a.dq[t * cols + c];
        truth += wv * a.x[t * cols + c];
        mag += std::fabs(wv * a.dq[t * cols + c]);
        bound += std::fabs(wv) * a.half_step[t * cols + c];
      }
      // float accumulation over blocks and the rounded d products: a few ulps of the
      // magnitude (and of the dequantized weights the reference sums, which round too).
      const double tol = 2e-5 * mag + 1e-30;
      const bool ok = std::fabs(got - exact) <= tol && std::fabs(got - truth) <= bound * (1 + 1e-6) + tol &&
                      (!other || std::fabs(got - (*other)[t * y_stride + r]) <= tol);
      if (!ok && ++failures < 5)
        ADD_FAILURE() << what << " r " << r << " t " << t << ": got " << got << ", exact " << exact << " (tol " << tol
                      << "), f32 " << truth << " (bound " << bound << ")"
                      << (other ? ", other variant " + std::to_string((*other)[t * y_stride + r]) : "");
    }
  }
  EXPECT_EQ(failures, 0) << what;
}

TEST_P(MatmulKQuant, Registered) {
  const MatmulKernel* k = kernel();
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->weight, GetParam().type);
  EXPECT_EQ(k->act, DType::Q8_K);
  EXPECT_EQ(k->isa, GetParam().isa);
  EXPECT_NE(k->convert_act, nullptr);
  EXPECT_NE(k->gemm, nullptr);
}

TEST_P(MatmulKQuant, OddShapesMatchReference) {
  if (skip()) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam().isa) << ": variant compiled but not run here";
  const MatmulKernel* k = kernel();
  ASSERT_NE(k, nullptr);
  const MatmulKernel* generic = find_matmul_kernel(GetParam().type, Isa::Generic);
  ASSERT_NE(generic, nullptr);
  std::mt19937 rng(static_cast<uint32_t>(GetParam().type) * 31 + static_cast<uint32_t>(GetParam().isa));
  constexpr int64_t kR0 = 5, kMaxRows = 67, kMaxTokens = 13;
  for (int64_t cols : {256, 768, 2816}) {
    const Weights w = make_weights(GetParam().type, kR0 + kMaxRows + 2, cols, 7, rng, false);
    const Acts a = make_acts(*k, kMaxTokens, cols, 3, rng, false);
    for (int64_t rows : {1, 3, 17, 67}) {
      for (int64_t n : {1, 2, 3, 5, 8, 13}) {
        const int64_t r0 = rows == 67 ? kR0 : 1 + rows % 4, y_stride = kR0 + kMaxRows + 5;
        const std::string what = std::string(dtype_name(GetParam().type)) + " " + std::string(isa_name(k->isa)) +
                                 " rows [" + std::to_string(r0) + ", " + std::to_string(r0 + rows) + ") cols " +
                                 std::to_string(cols) + " tokens " + std::to_string(n);
        const std::vector<float> y = run(*k, w, cols, r0, rows, a, n, y_stride);
        std::vector<float> y_generic;
        if (k != generic) y_generic = run(*generic, w, cols, r0, rows, a, n, y_stride);
        check(what, y, w, a, cols, r0, rows, n, y_stride, k != generic ? &y_generic : nullptr);
      }
    }
  }
}

// Random bytes as weights (every level, scale and min, q6_K scales down to -128) against
// activations at +-127: the largest intermediate sums the integer paths can see.
TEST_P(MatmulKQuant, ExtremeValuesMatchReference) {
  if (skip()) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam().isa) << ": variant compiled but not run here";
  const MatmulKernel* k = kernel();
  ASSERT_NE(k, nullptr);
  std::mt19937 rng(99);
  const int64_t cols = 1024, rows = 9;
  const Weights w = make_weights(GetParam().type, rows, cols, 0, rng, true);
  for (int64_t n : {1, 6}) {  // the one-token path and the panel path
    const Acts a = make_acts(*k, n, cols, 0, rng, true);
    const std::vector<float> y = run(*k, w, cols, 0, rows, a, n, rows);
    check(std::string(dtype_name(GetParam().type)) + " extremes, tokens " + std::to_string(n), y, w, a, cols, 0, rows,
          n, rows, nullptr);
  }
}

// The backend splits rows across worker threads that call gemm at once; each thread's
// panel scratch is its own.
TEST_P(MatmulKQuant, ConcurrentRowRangesMatchOneCall) {
  if (skip()) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam().isa) << ": variant compiled but not run here";
  const MatmulKernel* k = kernel();
  ASSERT_NE(k, nullptr);
  std::mt19937 rng(5);
  const int64_t cols = 768, rows = 40, n = 7;
  const Weights w = make_weights(GetParam().type, rows, cols, 0, rng, false);
  const Acts a = make_acts(*k, n, cols, 0, rng, false);
  const std::vector<float> whole = run(*k, w, cols, 0, rows, a, n, rows);
  std::vector<float> split(n * rows, -12345.0f);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < 20; ++rep)
        k->gemm(w.bytes.data(), w.stride, cols, 10 * i, 10 * i + 10, a.q.data(), a.stride, n, split.data(), rows);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(whole, split);  // same rows, same arithmetic: bit-identical
}

TEST_P(MatmulKQuant, EmptyCallsWriteNothing) {
  if (skip()) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam().isa) << ": variant compiled but not run here";
  const MatmulKernel* k = kernel();
  ASSERT_NE(k, nullptr);
  std::mt19937 rng(6);
  const int64_t cols = 256, rows = 4;
  const Weights w = make_weights(GetParam().type, rows, cols, 0, rng, false);
  const Acts a = make_acts(*k, 1, cols, 0, rng, false);
  std::vector<float> y(rows, -12345.0f);
  k->gemm(w.bytes.data(), w.stride, cols, 2, 2, a.q.data(), a.stride, 1, y.data(), rows);  // no rows
  k->gemm(w.bytes.data(), w.stride, cols, 0, rows, a.q.data(), a.stride, 0, y.data(), rows);  // no tokens
  EXPECT_EQ(y, std::vector<float>(rows, -12345.0f));
}

// The prepare hooks and packed weights (q2_K, q3_K, q4_K, q6_K and iq4_xs on AVX-512), on
// odd row ranges, padded and unaligned rows and prepared rows, token counts on both sides of
// the few-token path (8) and of a token tile (64), one token included (what decode runs on
// packed q2_K, q3_K and iq4_xs), several column chunks (2816 = 11 super-blocks), and
// random bytes as weights: prepared rows give gemm's results bit for bit (the file's layout
// runs the same code); packed weights run other float steps on the same exact integer sums,
// so they are checked as gemm is, against the reference and against gemm, within
// 2e-5 * sum |w x|.
TEST_P(MatmulKQuant, PackedPathMatchesReference) {
  if (skip()) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam().isa) << ": variant compiled but not run here";
  const MatmulKernel* k = kernel();
  ASSERT_NE(k, nullptr);
  ASSERT_EQ(k->pack_rows != nullptr, k->gemm_packed != nullptr);
  ASSERT_TRUE(k->pack_rows == nullptr || (k->prepare && k->prepared_row_bytes && k->gemm_prepared));
  if (!k->prepare) GTEST_SKIP() << "this kernel has no prepare step";
  std::mt19937 rng(17);
  // Random bytes as weights too (every level, scale and min), in the one-chunk shape.
  for (const auto& [cols, random_bits] : {std::pair<int64_t, bool>{256, true}, {256, false}, {2816, false}}) {
    const int64_t max_rows = 70, max_tokens = 75;
    const Weights w = make_weights(GetParam().type, max_rows, cols, 5, rng, random_bits);
    const Acts a = make_acts(*k, max_tokens, cols, 3, rng, false);
    const size_t prb = k->prepared_row_bytes(cols) + 96;
    std::vector<uint8_t> prepared(prb * max_tokens, 0xEE);
    for (int64_t t = 0; t < max_tokens; ++t) k->prepare(a.q.data() + t * a.stride, cols, prepared.data() + t * prb);
    // Packed rows further apart than the backend's stride (packed_row_bytes).
    const size_t packed_stride = packed_row_bytes(*k, w.stride) + 64;
    std::vector<uint8_t> packed(packed_stride * max_rows, 0xEE);
    for (int64_t rows : {1, 9, 69}) {
      const int64_t r0 = rows == 69 ? 1 : 2;  // only [r0, r0 + rows) is packed: the rest is junk
      std::fill(packed.begin(), packed.end(), 0xEE);
      if (k->pack_rows) k->pack_rows(w.bytes.data(), w.stride, cols, r0, r0 + rows, packed.data(), packed_stride);
      for (int64_t n : {1, 3, 5, 8, 9, 32, 75}) {
        const int64_t y_stride = max_rows + 3;
        const std::string what = std::string(dtype_name(GetParam().type)) + " rows [" + std::to_string(r0) + ", " +
                                 std::to_string(r0 + rows) + ") cols " + std::to_string(cols) + " tokens " +
                                 std::to_string(n);
        const std::vector<float> want = run(*k, w, cols, r0, rows, a, n, y_stride);
        std::vector<float> y(n * y_stride, -12345.0f);
        k->gemm_prepared(w.bytes.data(), w.stride, cols, r0, r0 + rows, prepared.data(), prb, n, y.data(), y_stride);
        EXPECT_EQ(y, want) << what << ": prepared rows";
        if (!k->pack_rows) continue;
        std::fill(y.begin(), y.end(), -12345.0f);
        k->gemm_packed(packed.data(), packed_stride, cols, r0, r0 + rows, prepared.data(), prb, n, y.data(),
                       y_stride);
        check(what + " packed", y, w, a, cols, r0, rows, n, y_stride, &want);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(MatmulKTypes, MatmulKQuant,
                         testing::Values(KQuantCase{DType::Q4_K, Isa::Generic}, KQuantCase{DType::Q4_K, Isa::Avx2},
                                         KQuantCase{DType::Q4_K, Isa::Avx512}, KQuantCase{DType::Q5_K, Isa::Generic},
                                         KQuantCase{DType::Q5_K, Isa::Avx2}, KQuantCase{DType::Q5_K, Isa::Avx512},
                                         KQuantCase{DType::Q6_K, Isa::Generic}, KQuantCase{DType::Q6_K, Isa::Avx2},
                                         KQuantCase{DType::Q6_K, Isa::Avx512}, KQuantCase{DType::Q2_K, Isa::Generic},
                                         KQuantCase{DType::Q2_K, Isa::Avx2}, KQuantCase{DType::Q2_K, Isa::Avx512},
                                         KQuantCase{DType::Q3_K, Isa::Generic}, KQuantCase{DType::Q3_K, Isa::Avx2},
                                         KQuantCase{DType::Q3_K, Isa::Avx512}, KQuantCase{DType::IQ4_XS, Isa::Generic},
                                         KQuantCase{DType::IQ4_XS, Isa::Avx2}, KQuantCase{DType::IQ4_XS, Isa::Avx512}),
                         kquant_case_name);

}  // namespace
}  // namespace th::cpu
