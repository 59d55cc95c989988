// The CUDA backend, op by op, against the reference backend (as backend_ops_test does for
// the CPU backend): random inputs of odd shapes, drawn afresh for every check, outputs
// poisoned with NaN before each op so that an unwritten element fails, fp32 tolerances
// (stated with each check, in units of u = 2^-24 where derived from the arithmetic).
// Without a device every test but the first skips with "no CUDA device: ..." (or "built
// without CUDA"): these run on a GPU machine (scripts/device-check.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "tensor/half.h"
#include "tensor/quant.h"
#include "test_numeric.h"

namespace th {
namespace {

using test::gamma;
using test::kU;
using test::random_floats;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(CudaBackendAvailability, WithoutADeviceTheErrorIsClearAndNothingCrashes) {
  Result<std::unique_ptr<Backend>> b = make_cuda_backend();
  const std::vector<std::string> devices = cuda_devices();
  ASSERT_FALSE(devices.empty());
  if (b.ok()) {  // a GPU machine
    EXPECT_EQ((*b)->name(), "cuda");
    EXPECT_EQ(devices[0].rfind("0: ", 0), 0u) << devices[0];
    return;
  }
  const std::string& m = b.message();
  EXPECT_TRUE(m.rfind("no CUDA device: ", 0) == 0 || m.rfind("built without CUDA", 0) == 0) << m;
  EXPECT_EQ(devices.size(), 1u);
  EXPECT_TRUE(devices[0].rfind("no CUDA device", 0) == 0 || devices[0].rfind("built without CUDA", 0) == 0)
      << devices[0];
  CudaBackendOptions o;
  o.device = 7;
  EXPECT_FALSE(make_cuda_backend(o).ok());
}


class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<Backend>> b = make_cuda_backend();
    if (!b.ok()) GTEST_SKIP() << b.message();
    gpu_ = std::move(b).value();
    ref_ = make_reference_backend();
  }
  void TearDown() override {
    if (gpu_)
      for (float* p : bufs_) gpu_->free(p);
  }
  // A device buffer holding host (freed with the test).
  float* up(const std::vector<float>& host) {
    float* p = gpu_->alloc(static_cast<int64_t>(host.size()));
    gpu_->copy_from_host(host.data(), p, host.size() * sizeof(float));
    bufs_.push_back(p);
    return p;
  }
  float* poisoned(int64_t n) { return up(std::vector<float>(static_cast<size_t>(n), kNaN)); }
  std::vector<float> down(const float* p, int64_t n) {
    std::vector<float> h(static_cast<size_t>(n));
    gpu_->read(p, h.data(), n);
    return h;
  }
  // Every element within tol[i] of want and not NaN.
  static void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                           const std::vector<double>& tol, const std::string& what) {
    ASSERT_EQ(got.size(), want.size());
    int bad = 0;
    for (size_t i = 0; i < got.size() && bad < 5; ++i) {
      const bool ok = !std::isnan(got[i]) && std::fabs(static_cast<double>(got[i]) - want[i]) <= tol[i];
      if (!ok) {
        ++bad;
        ADD_FAILURE() << what << " [" << i << "]: got " << got[i] << ", want " << want[i] << " +- " << tol[i];
      }
    }
  }
  static std::vector<double> rel(const std::vector<float>& want, double r, double a = 0) {
    std::vector<double> t(want.size());
    for (size_t i = 0; i < t.size(); ++i) t[i] = r * std::fabs(want[i]) + a;
    return t;
  }

  // Weight bytes that live as long as the backend: it caches uploads by address (cuda_backend.h),
  // so a freed vector's address reused by the next weight would find the old upload.
  const std::vector<uint8_t>& kept(std::vector<uint8_t> bytes) { return weights_.emplace_back(std::move(bytes)); }

  std::unique_ptr<Backend> gpu_, ref_;
  std::vector<float*> bufs_;
  std::deque<std::vector<uint8_t>> weights_;
  std::mt19937 rng_{20260830};
};

// The weight bytes of type t for rows x cols values x (reference quantizer for block types).
std::vector<uint8_t> weight_bytes(DType t, const std::vector<float>& x, int64_t rows, int64_t cols) {
  const size_t rb = row_bytes(t, cols);
  std::vector<uint8_t> out(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) quantize_row(t, x.data() + r * cols, out.data() + r * rb, cols);
  return out;
}

const DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,  DType::Q4_1,   DType::Q5_0,
                              DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,  DType::Q4_K,   DType::Q5_K,
                              DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::FP8_E4M3};

// Both product paths (cuda_matmul.h): our kernel up to 8 tokens (f32 weights: always, in
// tiles of 8), tensor cores beyond; rows of whole 16-byte chunks and odd ones.
TEST_F(CudaOps, MatmulEveryWeightType) {
  for (DType t : kWeightTypes) {
    if (!dtype_info(t).can_dequantize) continue;
    const bool is_float = t == DType::F32 || t == DType::F16 || t == DType::BF16;
    // 16416: a row long enough to be split over several warps (cuda_matmul.cu's kSplitChunks).
    for (int64_t cols : {int64_t{512}, int64_t{4160}, int64_t{67}, int64_t{16416}}) {
      if (cols % dtype_info(t).block_size != 0) continue;
      if (cols == 16416 && !is_float && t != DType::FP8_E4M3) continue;
      for (int64_t n_tokens : {1, 3, 8, 9, 17}) {
        const int64_t rows = 37;
        const std::vector<uint8_t>& wb = kept(weight_bytes(t, random_floats(rng_, rows * cols), rows, cols));
        const WeightView w{t, rows, cols, wb.data()};
        const std::vector<float> x = random_floats(rng_, n_tokens * cols);
        std::vector<float> want(static_cast<size_t>(n_tokens * rows));
        ref_->matmul(w, x.data(), want.data(), n_tokens);
        float* y = poisoned(n_tokens * rows);
        gpu_->matmul(w, up(x), y, n_tokens);
        // |error| <= (gamma(cols) + u) * sum |w x| for weights the device holds exactly (f32,
        // f16, bf16, fp8); other quantized weights are rounded to f16 at upload: + 2^-11 *
        // sum |w x|. Beyond 8 tokens, 16-bit and fp8 weights meet activations rounded to
        // f16 (2^-11) or bf16 (2^-8; fp8 is widened to bf16) on tensor cores.
        const bool exact = is_float || t == DType::FP8_E4M3;
        double act = 0;
        if (n_tokens > 8 && t != DType::F32)
          act = (t == DType::BF16 || t == DType::FP8_E4M3) ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
        std::vector<float> wrow(static_cast<size_t>(cols));
        std::vector<double> tol(want.size());
        for (int64_t r = 0; r < rows; ++r) {
          dequantize_row(t, wb.data() + r * row_bytes(t, cols), wrow.data(), cols);
          for (int64_t tk = 0; tk < n_tokens; ++tk) {
            double s = 0;
            for (int64_t c = 0; c < cols; ++c) s += std::fabs(wrow[c] * x[tk * cols + c]);
            tol[tk * rows + r] = (gamma(cols) + kU + (exact ? 0 : std::ldexp(1.0, -11)) + act) * s + 1e-30;
          }
        }
        const std::string what = std::string("matmul ") + std::string(dtype_name(t)) + " cols " +
                                  std::to_string(cols) + " tokens " + std::to_string(n_tokens);
        expect_close(down(y, n_tokens * rows), want, tol, what);
        // Second call: the cached upload gives the same answer.
        float* y2 = poisoned(n_tokens * rows);
        gpu_->matmul(w, up(x), y2, n_tokens);
        expect_close(down(y2, n_tokens * rows), want, tol, what + " again");
      }
    }
  }
}

// A token's product does not depend on the tokens beside it, bit for bit, where
// cuda_matmul.h promises it: f32 weights at any count, the others up to 8 tokens.
TEST_F(CudaOps, MatmulOfATokenIsTheSameInAnyBatch) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_K, DType::FP8_E4M3})
  for (int64_t cols : {int64_t{1024}, int64_t{16384}}) {
    const int64_t rows = 45;
    const std::vector<uint8_t>& wb = kept(weight_bytes(t, random_floats(rng_, rows * cols), rows, cols));
    const WeightView w{t, rows, cols, wb.data()};
    const int64_t most = t == DType::F32 ? 21 : 8;
    const std::vector<float> x = random_floats(rng_, most * cols);
    float* y = poisoned(most * rows);
    gpu_->matmul(w, up(x), y, most);
    const std::vector<float> together = down(y, most * rows);
    for (int64_t tk = 0; tk < most; ++tk) {
      const std::vector<float> one(x.begin() + tk * cols, x.begin() + (tk + 1) * cols);
      float* y1 = poisoned(rows);
      gpu_->matmul(w, up(one), y1, 1);
      const std::vector<float> alone = down(y1, rows);
      for (int64_t r = 0; r < rows; ++r)
        ASSERT_EQ(alone[r], together[tk * rows + r]) << dtype_name(t) << " token " << tk << " row " << r;
    }
  }
}

// matmuls (a layer's q, k, v in one launch where the backend fuses them) gives what one matmul
// per weight gives, bit for bit; weights it cannot fuse (types differ) go one by one.
TEST_F(CudaOps, MatmulsOfOneInputEqualOneMatmulEach) {
  for (DType t : {DType::F32, DType::BF16, DType::FP8_E4M3, DType::Q4_K})
  for (int64_t cols : {int64_t{256}, int64_t{16384}})
  for (int64_t n : {1, 5, 12}) {
    const int64_t rows[3] = {48, 16, 9};
    WeightView w[3];
    for (int j = 0; j < 3; ++j) {
      const DType tj = (t == DType::Q4_K && j == 2) ? DType::BF16 : t;  // mixed types: not fused
      const std::vector<uint8_t>& wb = kept(weight_bytes(tj, random_floats(rng_, rows[j] * cols), rows[j], cols));
      w[j] = WeightView{tj, rows[j], cols, wb.data()};
    }
    const float* x = up(random_floats(rng_, n * cols));
    float* together[3];
    std::vector<MatmulJob> jobs;
    for (int j = 0; j < 3; ++j) jobs.push_back({&w[j], together[j] = poisoned(n * rows[j])});
    gpu_->matmuls(jobs, x, n);
    for (int j = 0; j < 3; ++j) {
      float* alone = poisoned(n * rows[j]);
      gpu_->matmul(w[j], x, alone, n);
      const std::vector<float> a = down(alone, n * rows[j]), b = down(together[j], n * rows[j]);
      for (size_t i = 0; i < a.size(); ++i)
        ASSERT_EQ(a[i], b[i]) << dtype_name(t) << " cols " << cols << " n " << n << " job " << j << " [" << i << "]";
    }
  }
}

TEST_F(CudaOps, EmbedIsExact) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_K}) {
    const int64_t rows = 29, cols = 256, n = 11;
    const std::vector<uint8_t> wb = weight_bytes(t, random_floats(rng_, rows * cols), rows, cols);
    const WeightView w{t, rows, cols, wb.data()};
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& id : ids) id = static_cast<int32_t>(rng_() % rows);
    std::vector<float> want(static_cast<size_t>(n * cols));
    ref_->embed(w, ids.data(), n, want.data());
    float* out = poisoned(n * cols);
    gpu_->embed(w, ids.data(), n, out);
    expect_close(down(out, n * cols), want, rel(want, 0), "embed");
  }
}

TEST_F(CudaOps, Rmsnorm) {
  for (int64_t dim : {1, 7, 255, 1000, 4099}) {
    const int64_t n_rows = 5;
    const std::vector<float> x = random_floats(rng_, n_rows * dim, -3, 3), w = random_floats(rng_, dim);
    std::vector<float> want(static_cast<size_t>(n_rows * dim));
    ref_->rmsnorm(x.data(), w.data(), want.data(), n_rows, dim, 1e-5f);
    float* y = poisoned(n_rows * dim);
    gpu_->rmsnorm(up(x), w.data(), y, n_rows, dim, 1e-5f);
    // Both sum squares in f32 in different orders: the scale differs by <= gamma(dim) + a few u
    // (division, sqrt, the final products) relative.
    expect_close(down(y, n_rows * dim), want, rel(want, gamma(dim) + 8 * kU, 1e-30), "rmsnorm");
  }
}

TEST_F(CudaOps, RopeEveryVariant) {
  for (bool neox : {false, true}) {
    for (bool factors : {false, true}) {
      const int64_t n_tokens = 5, n_heads = 3, head_dim = 64, rot_dim = 48;
      std::vector<float> ff = random_floats(rng_, rot_dim / 2, 1.0f, 8.0f);
      RopeParams p{rot_dim, 500000.0f, 0.5f, neox, factors ? ff.data() : nullptr};
      std::vector<int32_t> pos = {0, 1, 17, 999, 4000};
      const std::vector<float> x = random_floats(rng_, n_tokens * n_heads * head_dim);
      std::vector<float> want = x;
      ref_->rope(want.data(), pos.data(), n_tokens, n_heads, head_dim, p);
      float* d = up(x);
      gpu_->rope(d, pos.data(), n_tokens, n_heads, head_dim, p);
      // cosf/sinf on the device are within 2 ulp of the host's; |x| <= 1.
      expect_close(down(d, n_tokens * n_heads * head_dim), want, rel(want, 8 * kU, 1e-6), "rope");
    }
  }
}

TEST_F(CudaOps, Swiglu) {
  const int64_t n = 100003;
  const std::vector<float> g = random_floats(rng_, n, -10, 10), u = random_floats(rng_, n, -3, 3);
  std::vector<float> want(static_cast<size_t>(n));
  ref_->swiglu(g.data(), u.data(), want.data(), n);
  float* out = poisoned(n);
  gpu_->swiglu(up(g), up(u), out, n);
  expect_close(down(out, n), want, rel(want, 1e-5, 1e-30), "swiglu");  // expf within 2 ulp
}

TEST_F(CudaOps, GegluSoftcapScaleAndAddRowsScaled) {
  const int64_t n = 100003;
  const std::vector<float> g = random_floats(rng_, n, -10, 10), u = random_floats(rng_, n, -3, 3);
  std::vector<float> want(static_cast<size_t>(n));
  ref_->geglu(g.data(), u.data(), want.data(), n);
  float* out = poisoned(n);
  gpu_->geglu(up(g), up(u), out, n);
  expect_close(down(out, n), want, rel(want, 1e-5, 1e-6), "geglu");  // tanhf within 2 ulp
  want = g;
  ref_->softcap(want.data(), n, 3.0f);
  float* y = up(g);
  gpu_->softcap(y, n, 3.0f);
  expect_close(down(y, n), want, rel(want, 1e-5, 1e-6), "softcap");
  ref_->scale(want.data(), n, -0.5f);
  gpu_->scale(y, n, -0.5f);
  expect_close(down(y, n), want, rel(want, 1e-5, 1e-6), "scale");
  // One expert's outputs added back to its 5 tokens of 11, weighted.
  const int64_t rows = 11, dim = 333;
  const std::vector<float> dst0 = random_floats(rng_, rows * dim), src = random_floats(rng_, 5 * dim);
  const std::vector<int32_t> idx = {7, 0, 10, 3, 4};
  const std::vector<float> w = {0.5f, 0.25f, 0.125f, 0.0625f, 0.0625f};
  std::vector<float> want_rows = dst0;
  ref_->add_rows_scaled(want_rows.data(), src.data(), idx.data(), w.data(), 5, dim);
  float* d = up(dst0);
  gpu_->add_rows_scaled(d, up(src), idx.data(), w.data(), 5, dim);
  expect_close(down(d, rows * dim), want_rows, rel(want_rows, 2 * kU, 1e-7), "add_rows_scaled");
}

TEST_F(CudaOps, GatherAddAndBiasAreExact) {
  const int64_t rows = 23, dim = 333, n = 9;
  const std::vector<float> src = random_floats(rng_, rows * dim);
  std::vector<int32_t> idx(static_cast<size_t>(n));
  for (auto& i : idx) i = static_cast<int32_t>(rng_() % rows);
  std::vector<float> want(static_cast<size_t>(n * dim));
  ref_->gather_rows(src.data(), idx.data(), n, dim, want.data());
  float* dst = poisoned(n * dim);
  gpu_->gather_rows(up(src), idx.data(), n, dim, dst);
  expect_close(down(dst, n * dim), want, rel(want, 0), "gather_rows");

  const std::vector<float> y0 = random_floats(rng_, rows * dim), x = random_floats(rng_, rows * dim);
  std::vector<float> y = y0;
  ref_->add(y.data(), x.data(), rows * dim);
  float* dy = up(y0);
  gpu_->add(dy, up(x), rows * dim);
  expect_close(down(dy, rows * dim), y, rel(y, 0), "add");

  const std::vector<float> bias = random_floats(rng_, dim);
  std::vector<float> yb = y0;
  ref_->add_bias(yb.data(), bias.data(), rows, dim);
  float* db = up(y0);
  gpu_->add_bias(db, bias.data(), rows, dim);
  expect_close(down(db, rows * dim), yb, rel(yb, 0), "add_bias");
}

// A paged KV cache of n_slots rows on both backends.
struct Pools {
  std::vector<float> k, v;  // reference (host) pools, sized in floats
  float *dk = nullptr, *dv = nullptr;
};

TEST_F(CudaOps, KvWriteStoresTheReferenceBytes) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    const int64_t kv_dim = 96, n_slots = 40, n_tokens = 7;
    const size_t pool_bytes = row_bytes(t, kv_dim) * n_slots;
    const int64_t pool_floats = static_cast<int64_t>(pool_bytes / 4 + 1);
    std::vector<float> rk(static_cast<size_t>(pool_floats)), rv(rk.size());
    float* dk = up(std::vector<float>(rk.size()));
    float* dv = up(std::vector<float>(rk.size()));
    std::vector<int32_t> slots = {3, 0, 39, 17, 18, 5, 22};
    std::vector<int32_t> seq(n_tokens, 0), pos(n_tokens, 0);
    const AttentionBatch b{n_tokens, seq.data(), pos.data(), slots.data(), {}, 16};
    const std::vector<float> k = random_floats(rng_, n_tokens * kv_dim), v = random_floats(rng_, n_tokens * kv_dim);
    ref_->kv_write(KvLayerView{rk.data(), rv.data(), kv_dim, t}, b, k.data(), v.data());
    gpu_->kv_write(KvLayerView{dk, dv, kv_dim, t}, b, up(k), up(v));
    std::vector<uint8_t> gk(pool_bytes), gv(pool_bytes);
    gpu_->copy_to_host(dk, gk.data(), pool_bytes);
    gpu_->copy_to_host(dv, gv.data(), pool_bytes);
    EXPECT_EQ(std::memcmp(gk.data(), rk.data(), pool_bytes), 0) << dtype_name(t);
    EXPECT_EQ(std::memcmp(gv.data(), rv.data(), pool_bytes), 0) << dtype_name(t);
  }
}

TEST_F(CudaOps, AttentionRaggedBatchEveryKvTypeAndGqaRatio) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    for (int64_t group : {1, 4}) {
      for (int64_t head_dim : {64, 128, 96}) {
        const int64_t n_kv_heads = 2, n_heads = n_kv_heads * group, kv_dim = n_kv_heads * head_dim;
        const int64_t block_size = 16, n_blocks = 24;
        // Two sequences with scattered blocks; the batch holds each sequence's whole history
        // (written first) and attends at some of its positions.
        std::vector<std::vector<int32_t>> tables = {{5, 0, 17, 3, 9, 11, 2}, {23, 1, 8, 4}};
        const std::vector<int64_t> lens = {101, 50};
        std::vector<int32_t> seq, pos, slot;
        for (int s = 0; s < 2; ++s)
          for (int64_t p = 0; p < lens[s]; ++p) {
            seq.push_back(s);
            pos.push_back(static_cast<int32_t>(p));
            slot.push_back(tables[s][p / block_size] * static_cast<int32_t>(block_size) +
                           static_cast<int32_t>(p % block_size));
          }
        std::vector<std::span<const int32_t>> spans(tables.begin(), tables.end());
        const int64_t n = static_cast<int64_t>(seq.size());
        const AttentionBatch b{n, seq.data(), pos.data(), slot.data(), spans, block_size};
        const size_t pool_bytes = row_bytes(t, kv_dim) * n_blocks * block_size;
        const size_t pool_floats = pool_bytes / 4 + 1;
        std::vector<float> rk(pool_floats), rv(pool_floats);
        float* dk = up(std::vector<float>(pool_floats));
        float* dv = up(std::vector<float>(pool_floats));
        const std::vector<float> k = random_floats(rng_, n * kv_dim), v = random_floats(rng_, n * kv_dim);
        const std::vector<float> q = random_floats(rng_, n * n_heads * head_dim, -2, 2);
        const KvLayerView rkv{rk.data(), rv.data(), kv_dim, t}, gkv{dk, dv, kv_dim, t};
        ref_->kv_write(rkv, b, k.data(), v.data());
        gpu_->kv_write(gkv, b, up(k), up(v));
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        // Plain causal, then a sliding window of 13 with a soft-cap of 2 (gemma2's options).
        for (const AttentionOptions opt : {AttentionOptions{}, AttentionOptions{13, 2.0f}}) {
          std::vector<float> want(q.size());
          ref_->attention(rkv, b, q.data(), want.data(), n_heads, n_kv_heads, head_dim, scale, opt);
          float* out = poisoned(static_cast<int64_t>(q.size()));
          gpu_->attention(gkv, b, up(q), out, n_heads, n_kv_heads, head_dim, scale, opt);
          // |v| <= 1 and the weights sum to 1: both results are convex combinations computed in
          // f32 with exp (and tanh) within 2 ulp, in different orders over <= 101 positions.
          expect_close(down(out, static_cast<int64_t>(q.size())), want, rel(want, 0, 2e-5),
                       cat("attention ", dtype_name(t), " group ", group, " head_dim ", head_dim, " window ",
                           opt.window));
        }
      }
    }
  }
}

TEST_F(CudaOps, HostTierCopiesRoundTrip) {
  const std::vector<float> x = random_floats(rng_, 1234);
  float* d = poisoned(1234);
  gpu_->copy_from_host(x.data(), d, x.size() * sizeof(float));
  std::vector<float> back(x.size());
  gpu_->copy_to_host(d, back.data(), back.size() * sizeof(float));
  EXPECT_EQ(back, x);
}

}  // namespace
}  // namespace th
