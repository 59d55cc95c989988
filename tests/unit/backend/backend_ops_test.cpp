// Every op of the fast CPU backend against the reference backend on random
// inputs of odd sizes (llama.cpp's test-backend-ops, for this interface), at
// 1, 2 and 3 threads and every ISA this CPU runs. Where the two may round
// differently, the tolerance is a bound derived from the arithmetic (stated
// next to each), in units of u = 2^-24, f32's unit roundoff.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/kernel_select.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/vec_ops.h"
#include "tensor/quant.h"
#include "test_numeric.h"

namespace th {
namespace {

using cpu::Isa;

using test::gamma;
using test::kU;
using test::random_floats;

struct Config {
  int threads;
  Isa isa;
};

std::vector<Config> configs() {
  std::vector<Config> c;
  // Under the sanitizers one and three threads: two adds no path (row splits at odd
  // boundaries are three's), and these suites were 120 s of the sanitizer stage's test time.
#ifdef TH_SANITIZED_TESTS
  const std::vector<int> threads = {1, 3};
#else
  const std::vector<int> threads = {1, 2, 3};
#endif
  for (Isa isa : cpu::available_isas())
    for (int t : threads) c.push_back({t, isa});
  return c;
}

std::string config_name(const ::testing::TestParamInfo<Config>& info) {
  return std::string(cpu::isa_name(info.param.isa)) + "_t" + std::to_string(info.param.threads);
}

class BackendOps : public ::testing::TestWithParam<Config> {
 protected:
  void SetUp() override {
    CpuBackendOptions o;
    o.n_threads = GetParam().threads;
    o.isa = GetParam().isa;
    fast_ = make_cpu_backend(o);
    ref_ = make_reference_backend();
  }

  // A backend buffer holding v (each backend gets its own copy).
  struct Buf {
    Backend* b;
    float* p;
    int64_t n;
    Buf(Backend& be, const std::vector<float>& v) : b(&be), p(be.alloc(static_cast<int64_t>(v.size()))), n(static_cast<int64_t>(v.size())) {
      std::memcpy(p, v.data(), v.size() * sizeof(float));
    }
    Buf(Backend& be, int64_t size) : b(&be), p(be.alloc(size)), n(size) {}
    ~Buf() { b->free(p); }
    Buf(const Buf&) = delete;
    std::vector<float> get() const {
      std::vector<float> out(static_cast<size_t>(n));
      b->read(p, out.data(), n);
      return out;
    }
  };

  std::unique_ptr<Backend> fast_, ref_;
  std::mt19937 rng_{1234};
};

// ------------------------------------------------------------------- matmul

// The largest |x - x_hat| that converting x[c] into a kernel's activation format can
// cause. For 8-bit blocks (q8_0, q8_K) with d = amax / 127: rounding to the nearest q
// costs d / 2, storing d in f16 (q8_0) up to 127 * 2^-11 d more, and computing x * (1/d)
// in f32 a few u of 127 d more.
std::vector<double> act_error_bound(DType act, const float* x, int64_t cols) {
  std::vector<double> e(static_cast<size_t>(cols), 0.0);
  if (act == DType::F32) return e;
  if (act == DType::F16 || act == DType::BF16) {
    const double rel = act == DType::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    for (int64_t c = 0; c < cols; ++c) e[static_cast<size_t>(c)] = std::fabs(x[c]) * rel + std::ldexp(1.0, -25);
    return e;
  }
  const int64_t block = dtype_info(act).block_size;
  EXPECT_TRUE(act == DType::Q8_0 || act == DType::Q8_K || act == DType::Q8_1)
      << "no error bound written for activation type " << dtype_name(act);
  for (int64_t b0 = 0; b0 < cols; b0 += block) {
    double amax = 0;
    for (int64_t c = b0; c < std::min(cols, b0 + block); ++c) amax = std::max(amax, double(std::fabs(x[c])));
    const double d = amax / 127;
    const double err = d * (0.5 + 127 * std::ldexp(1.0, -11) + 127 * 4 * kU);
    for (int64_t c = b0; c < std::min(cols, b0 + block); ++c) e[static_cast<size_t>(c)] = err;
  }
  return e;
}

// The bound itself, checked where it can be without a kernel: x through the reference
// q8_0 quantizer (what ggml's and so the kernels' activation conversion computes) moves
// each element by no more than act_error_bound says.
TEST(ActErrorBound, HoldsForQ8_0Activations) {
  std::mt19937 rng(5);
  for (int rep = 0; rep < 200; ++rep) {
    const int64_t cols = 256;
    std::vector<float> x = random_floats(rng, cols, -4, 4);
    if (rep % 3 == 0) x[static_cast<size_t>(rep % cols)] = 300.0f;  // one large element per block
    std::vector<uint8_t> q(row_bytes(DType::Q8_0, cols));
    quantize_row(DType::Q8_0, x.data(), q.data(), cols);
    std::vector<float> xh(static_cast<size_t>(cols));
    dequantize_row(DType::Q8_0, q.data(), xh.data(), cols);
    const std::vector<double> e = act_error_bound(DType::Q8_0, x.data(), cols);
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_LE(std::fabs(double(xh[static_cast<size_t>(c)]) - x[static_cast<size_t>(c)]), e[static_cast<size_t>(c)]);
  }
}

struct MatmulCase {
  DType type;
  int64_t cols;
};

TEST_P(BackendOps, MatmulEveryWeightType) {
  const std::vector<MatmulCase> cases = {
      {DType::F32, 67},   {DType::F32, 160},  {DType::F16, 67},   {DType::F16, 96},   {DType::BF16, 67},
      {DType::BF16, 96},  {DType::Q8_0, 96},  {DType::Q8_0, 320}, {DType::Q4_0, 96},  {DType::Q4_1, 96},
      {DType::Q5_0, 96},  {DType::Q5_1, 160}, {DType::Q4_K, 256}, {DType::Q4_K, 512}, {DType::Q5_K, 256},
      {DType::Q6_K, 256}, {DType::Q6_K, 512}, {DType::Q2_K, 256}, {DType::Q2_K, 768}, {DType::Q3_K, 256},
      {DType::Q3_K, 512}, {DType::IQ4_NL, 96}, {DType::IQ4_NL, 160}, {DType::IQ4_XS, 256}, {DType::IQ4_XS, 768},
      {DType::FP8_E4M3, 96}, {DType::FP8_E4M3, 320},
  };
  for (const MatmulCase& mc : cases) {
    for (int64_t rows : {1, 37, 133}) {
      for (int64_t n_tok : {1, 3, 70}) {  // 70: more than one 64-token tile
        SCOPED_TRACE(std::string(dtype_name(mc.type)) + " rows " + std::to_string(rows) + " cols " +
                     std::to_string(mc.cols) + " tokens " + std::to_string(n_tok));
        const int64_t cols = mc.cols;
        const std::vector<float> wf = random_floats(rng_, rows * cols);
        std::vector<uint8_t> wq(row_bytes(mc.type, cols) * static_cast<size_t>(rows));
        for (int64_t r = 0; r < rows; ++r)
          quantize_row(mc.type, wf.data() + r * cols, wq.data() + static_cast<size_t>(r) * row_bytes(mc.type, cols), cols);
        std::vector<float> wd(wf.size());  // the weights both backends really multiply by
        for (int64_t r = 0; r < rows; ++r)
          dequantize_row(mc.type, wq.data() + static_cast<size_t>(r) * row_bytes(mc.type, cols), wd.data() + r * cols, cols);
        const WeightView w{mc.type, rows, cols, wq.data()};
        const std::vector<float> x = random_floats(rng_, n_tok * cols);

        Buf xf(*fast_, x), xr(*ref_, x), yf(*fast_, n_tok * rows), yr(*ref_, n_tok * rows);
        fast_->matmul(w, xf.p, yf.p, n_tok);
        ref_->matmul(w, xr.p, yr.p, n_tok);
        const std::vector<float> got = yf.get(), want = yr.get();

        const cpu::MatmulKernel* k = cpu::select_matmul_kernel(mc.type, GetParam().isa);
        const bool quantized_act = k && cols % dtype_info(k->act).block_size == 0;
        // What the fast sum's rounding is relative to, per weight. The fallback multiplies
        // dequantized weights, so |w|. A kernel works on the blocks as stored, adding a
        // scaled integer part (at most 2 max|w| of its block) and a min or zero point (at
        // most max|w|) separately, so its partial sums are bounded by 2 max|w| of the block.
        std::vector<double> w_mag(wd.size());
        const int64_t wblock = dtype_info(mc.type).block_size;
        for (size_t b0 = 0; b0 < wd.size(); b0 += static_cast<size_t>(wblock)) {
          double mx = 0;
          for (size_t c = b0; c < b0 + static_cast<size_t>(wblock); ++c) mx = std::max(mx, double(std::fabs(wd[c])));
          for (size_t c = b0; c < b0 + static_cast<size_t>(wblock); ++c)
            w_mag[c] = quantized_act ? 2 * mx : std::fabs(wd[c]);
        }
        int bad = 0;
        for (int64_t t = 0; t < n_tok && bad < 5; ++t) {
          const float* xt = x.data() + t * cols;
          const std::vector<double> e = quantized_act ? act_error_bound(k->act, xt, cols) : std::vector<double>(size_t(cols));
          for (int64_t r = 0; r < rows; ++r) {
            // The fast sum in f32: gamma_cols * sum w_mag |x_hat|, with |x_hat| <= |x| + e; the
            // activation conversion's error: sum |w| e; the reference's f64 sum rounded to f32
            // once: u |y|.
            double abs_prod = 0, act_err = 0;
            for (int64_t c = 0; c < cols; ++c) {
              const size_t wi = static_cast<size_t>(r * cols + c);
              abs_prod += w_mag[wi] * (std::fabs(xt[c]) + e[static_cast<size_t>(c)]);
              act_err += std::fabs(wd[wi]) * e[static_cast<size_t>(c)];
            }
            const size_t i = static_cast<size_t>(t * rows + r);
            const double bound = gamma(cols) * abs_prod + act_err + kU * std::fabs(want[i]);
            if (!(std::fabs(double(got[i]) - want[i]) <= bound)) {
              ADD_FAILURE() << "y[" << t << "][" << r << "] = " << got[i] << ", reference " << want[i] << ", bound "
                            << bound << (quantized_act ? " (kernel)" : " (fallback)");
              ++bad;
            }
          }
        }
      }
    }
  }
}

// matmuls (one input, several matrices) gives each matrix's matmul bit for bit: one region
// for matrices of one type and width (rows not multiples of the 16-row grain: the next
// matrix starts on a grain boundary), repacked or not, and one matmul each otherwise.
TEST_P(BackendOps, MatmulsOfOneInputEqualEachMatmul) {
  struct Set {
    std::vector<DType> types;
    int64_t cols;
  };
  const std::vector<Set> sets = {
      {{DType::Q4_0, DType::Q4_0, DType::Q4_0}, 96},    {{DType::Q2_K, DType::Q2_K}, 512},
      {{DType::Q8_0, DType::Q8_0, DType::Q8_0}, 64},    {{DType::F32, DType::F32}, 67},
      {{DType::Q4_0, DType::Q8_0, DType::Q4_0}, 96},  // mixed types: one matmul each
  };
  for (const Set& set : sets)
    for (bool repack : {false, true})
      for (int64_t n_tok : {1, 3, 70}) {
        SCOPED_TRACE(std::string(dtype_name(set.types[0])) + " x" + std::to_string(set.types.size()) +
                     (repack ? " repacked" : "") + " tokens " + std::to_string(n_tok));
        const int64_t cols = set.cols;
        const std::vector<int64_t> rows = {37, 5, 133};
        std::vector<std::vector<uint8_t>> wq(set.types.size());
        std::vector<WeightView> ws;
        for (size_t i = 0; i < set.types.size(); ++i) {
          const size_t rb = row_bytes(set.types[i], cols);
          const std::vector<float> wf = random_floats(rng_, rows[i] * cols);
          wq[i].resize(rb * static_cast<size_t>(rows[i]));
          for (int64_t r = 0; r < rows[i]; ++r)
            quantize_row(set.types[i], wf.data() + r * cols, wq[i].data() + static_cast<size_t>(r) * rb, cols);
          const WeightView w{set.types[i], rows[i], cols, wq[i].data()};
          ws.push_back(repack ? fast_->prepare_weight(w) : w);
        }
        Buf x(*fast_, random_floats(rng_, n_tok * cols));
        std::vector<std::unique_ptr<Buf>> together, alone;
        std::vector<MatmulJob> jobs;
        for (size_t i = 0; i < ws.size(); ++i) {
          together.push_back(std::make_unique<Buf>(*fast_, n_tok * rows[i]));
          alone.push_back(std::make_unique<Buf>(*fast_, n_tok * rows[i]));
          jobs.push_back({&ws[i], together.back()->p});
        }
        fast_->matmuls(jobs, x.p, n_tok);
        for (size_t i = 0; i < ws.size(); ++i) {
          fast_->matmul(ws[i], x.p, alone[i]->p, n_tok);
          const std::vector<float> got = together[i]->get(), want = alone[i]->get();
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << "matrix " << i;
        }
      }
}

// ------------------------------------------------------------- elementwise

TEST_P(BackendOps, EmbedIsExact) {
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                     DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q2_K, DType::Q3_K, DType::IQ4_NL,
                     DType::IQ4_XS}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    const int64_t rows = 29, cols = dtype_info(type).block_size == 256 ? 512 : 96;
    const std::vector<float> wf = random_floats(rng_, rows * cols);
    const size_t rb = row_bytes(type, cols);
    std::vector<uint8_t> wq(rb * rows);
    for (int64_t r = 0; r < rows; ++r) quantize_row(type, wf.data() + r * cols, wq.data() + r * rb, cols);
    const WeightView w{type, rows, cols, wq.data()};
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{400}}) {  // 400 x 512: enough to split across threads
      std::vector<int32_t> ids(static_cast<size_t>(n));
      for (int32_t& id : ids) id = static_cast<int32_t>(rng_() % rows);
      Buf of(*fast_, n * cols), orf(*ref_, n * cols);
      fast_->embed(w, ids.data(), n, of.p);
      ref_->embed(w, ids.data(), n, orf.p);
      ASSERT_EQ(of.get(), orf.get()) << "n " << n;
    }
  }
}

TEST_P(BackendOps, RmsnormWithinRoundingBound) {
  for (int64_t dim : {67, 4099}) {
    for (int64_t n_rows : {1, 3, 17}) {  // 17 x 4099: split across threads
      const std::vector<float> x = random_floats(rng_, n_rows * dim, -3, 3);
      const std::vector<float> wt = random_floats(rng_, dim, 0.5f, 1.5f);
      Buf xf(*fast_, x), xr(*ref_, x), yf(*fast_, n_rows * dim), yr(*ref_, n_rows * dim);
      fast_->rmsnorm(xf.p, wt.data(), yf.p, n_rows, dim, 1e-5f);
      ref_->rmsnorm(xr.p, wt.data(), yr.p, n_rows, dim, 1e-5f);
      const std::vector<float> got = yf.get(), want = yr.get();
      // The sum of squares of dim non-negative terms is within gamma_dim of exact in either
      // order, so the two differ by at most 2 gamma_dim relative; the scale 1/sqrt(ss/dim + eps)
      // halves that and adds four roundings (divide, add, sqrt, reciprocal) on each side; y =
      // x * scale * w two more on each side.
      const double rel = gamma(dim) + 2 * 6 * kU;
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_LE(std::fabs(double(got[i]) - want[i]), rel * std::fabs(want[i]) + 1e-30) << "dim " << dim << " i " << i;
    }
  }
}

TEST_P(BackendOps, RopeEveryVariantAndTheCacheFollowsParameters) {
  std::vector<float> factors = random_floats(rng_, 32, 1.0f, 8.0f);
  struct Variant {
    bool neox;
    int64_t head_dim, rot_dim;
    float base, scale;
    bool with_factors;
  };
  const std::vector<Variant> variants = {
      {false, 64, 64, 10000.0f, 1.0f, false}, {true, 64, 64, 1000000.0f, 1.0f, false},
      {false, 64, 64, 500000.0f, 1.0f, true}, {true, 80, 64, 10000.0f, 0.25f, true},  // partial rotation
      {false, 64, 64, 10000.0f, 1.0f, false},  // the first again, after other parameters
  };
  for (int round = 0; round < 2; ++round) {
    if (round == 1)
      for (float& f : factors) f *= 1.5f;  // same pointer, new values: the cache must notice
    for (const Variant& v : variants) {
      for (int64_t n_tok : {1, 5, 300}) {  // 300 tokens x 4 heads x 80: split across threads
        const int64_t n_heads = 4;
        std::vector<int32_t> pos(static_cast<size_t>(n_tok));
        for (int32_t& p : pos) p = static_cast<int32_t>(rng_() % 6000);
        const std::vector<float> x = random_floats(rng_, n_tok * n_heads * v.head_dim, -2, 2);
        RopeParams rp{v.rot_dim, v.base, v.scale, v.neox, v.with_factors ? factors.data() : nullptr};
        for (int twice = 0; twice < 2; ++twice) {  // the second call reuses the cached angles
          Buf xf(*fast_, x), xr(*ref_, x);
          fast_->rope(xf.p, pos.data(), n_tok, n_heads, v.head_dim, rp);
          ref_->rope(xr.p, pos.data(), n_tok, n_heads, v.head_dim, rp);
          // The same angles (computed the same way); per component two products and a sum,
          // 3 roundings of at most |x0| + |x1| <= 4 on each side.
          const std::vector<float> got = xf.get(), want = xr.get();
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_LE(std::fabs(double(got[i]) - want[i]), 2 * 3 * kU * 4.0)
                << "neox " << v.neox << " rot " << v.rot_dim << " tokens " << n_tok << " i " << i;
        }
      }
    }
  }
}

TEST_P(BackendOps, SwigluWithinExpBound) {
  for (int64_t n : {1, 7, 70001}) {
    const std::vector<float> g = random_floats(rng_, n, -12, 12), up = random_floats(rng_, n, -3, 3);
    Buf gf(*fast_, g), uf(*fast_, up), of(*fast_, n), gr(*ref_, g), ur(*ref_, up), orf(*ref_, n);
    fast_->swiglu(gf.p, uf.p, of.p, n);
    ref_->swiglu(gr.p, ur.p, orf.p, n);
    const std::vector<float> got = of.get(), want = orf.get();
    // exp's relative error (kExpMaxRelError here, under u for the C library's) passes
    // through 1 + e at most unchanged; add, divide and multiply round once each per side.
    const double rel = cpu::kExpMaxRelError + kU + 2 * 3 * kU;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_LE(std::fabs(double(got[i]) - want[i]), rel * std::fabs(want[i]) + 1e-37) << "n " << n << " i " << i;
  }
}

TEST_P(BackendOps, GatherAddAndBiasAreExact) {
  for (int64_t n : {int64_t{3}, int64_t{50000}}) {
    const std::vector<float> a = random_floats(rng_, n), b = random_floats(rng_, n);
    Buf af(*fast_, a), bf(*fast_, b), ar(*ref_, a), br(*ref_, b);
    fast_->add(af.p, bf.p, n);
    ref_->add(ar.p, br.p, n);
    ASSERT_EQ(af.get(), ar.get());
  }
  for (int64_t dim : {int64_t{5}, int64_t{1031}}) {
    for (int64_t rows : {int64_t{1}, int64_t{40}}) {
      const std::vector<float> y = random_floats(rng_, rows * dim), bias = random_floats(rng_, dim);
      Buf yf(*fast_, y), yr(*ref_, y);
      fast_->add_bias(yf.p, bias.data(), rows, dim);
      ref_->add_bias(yr.p, bias.data(), rows, dim);
      ASSERT_EQ(yf.get(), yr.get());

      std::vector<int32_t> idx(static_cast<size_t>(rows + 3));
      for (int32_t& i : idx) i = static_cast<int32_t>(rng_() % rows);
      const int64_t m = static_cast<int64_t>(idx.size());
      Buf gf(*fast_, m * dim), gr(*ref_, m * dim);
      fast_->gather_rows(yf.p, idx.data(), m, dim, gf.p);
      ref_->gather_rows(yr.p, idx.data(), m, dim, gr.p);
      ASSERT_EQ(gf.get(), gr.get());
    }
  }
}

// ---------------------------------------------------------------- KV cache

// Pools for n_slots rows of kv_dim elements of `type`, allocated by one backend.
struct KvPools {
  Backend* b;
  float* k;
  float* v;
  KvPools(Backend& be, int64_t n_slots, int64_t kv_dim, DType type) : b(&be) {
    const int64_t floats = static_cast<int64_t>((row_bytes(type, kv_dim) * n_slots + 3) / 4);
    k = be.alloc(floats);
    v = be.alloc(floats);
  }
  ~KvPools() {
    b->free(k);
    b->free(v);
  }
  KvPools(const KvPools&) = delete;
};

TEST_P(BackendOps, KvWriteStoresTheReferenceBytes) {
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    for (int64_t n_tok : {1, 9, 300}) {
      const int64_t kv_dim = 96, n_slots = 512;
      const size_t rb = row_bytes(type, kv_dim);
      std::vector<int32_t> slots(n_slots);
      std::iota(slots.begin(), slots.end(), 0);
      std::shuffle(slots.begin(), slots.end(), rng_);
      slots.resize(static_cast<size_t>(n_tok));
      AttentionBatch ab;
      ab.n_tokens = n_tok;
      ab.token_slot = slots.data();
      const std::vector<float> k = random_floats(rng_, n_tok * kv_dim), v = random_floats(rng_, n_tok * kv_dim);
      KvPools pf(*fast_, n_slots, kv_dim, type), pr(*ref_, n_slots, kv_dim, type);
      Buf kf(*fast_, k), vf(*fast_, v), kr(*ref_, k), vr(*ref_, v);
      fast_->kv_write({pf.k, pf.v, kv_dim, type}, ab, kf.p, vf.p);
      ref_->kv_write({pr.k, pr.v, kv_dim, type}, ab, kr.p, vr.p);
      ASSERT_EQ(std::memcmp(pf.k, pr.k, rb * n_slots), 0) << dtype_name(type) << " tokens " << n_tok;
      ASSERT_EQ(std::memcmp(pf.v, pr.v, rb * n_slots), 0) << dtype_name(type) << " tokens " << n_tok;
    }
  }
}

struct AttentionShape {
  int64_t head_dim, n_kv_heads;
};

TEST_P(BackendOps, AttentionRaggedBatchEveryKvTypeGqaRatioAndBlockSize) {
  // Three sequences in one batch: a prompt chunk continuing at position 30, a lone decode
  // token at position 150 (several KV tiles), and a new 5-token prompt.
  struct SeqPart {
    int32_t first_pos, n;
  };
  const std::vector<SeqPart> parts = {{30, 8}, {150, 1}, {0, 5}};
  // head_dim 8 (stories260K), 48 (q8_0 blocks straddle heads; 32 + 16 lanes), 20 (scalar tails).
  const std::vector<AttentionShape> shapes = {{8, 4}, {48, 2}, {20, 8}};
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    for (const AttentionShape& sh : shapes) {
      for (int64_t ratio : {1, 2, 4, 8}) {
        for (int64_t block : {1, 4, 16}) {
          SCOPED_TRACE(std::string(dtype_name(type)) + " head_dim " + std::to_string(sh.head_dim) + " gqa " +
                       std::to_string(ratio) + " block " + std::to_string(block));
          const int64_t hd = sh.head_dim, n_kv = sh.n_kv_heads, n_heads = n_kv * ratio, kv_dim = n_kv * hd;
          ASSERT_EQ(kv_dim % 32, 0);
          // Block tables: each sequence's blocks scattered over a shuffled pool.
          const int64_t max_pos = 151;
          const int64_t blocks_per_seq = (max_pos + block - 1) / block;
          std::vector<int32_t> pool_blocks(static_cast<size_t>(blocks_per_seq * 3));
          std::iota(pool_blocks.begin(), pool_blocks.end(), 0);
          std::shuffle(pool_blocks.begin(), pool_blocks.end(), rng_);
          std::vector<std::vector<int32_t>> tables(3);
          for (size_t s = 0; s < 3; ++s)
            tables[s].assign(pool_blocks.begin() + static_cast<int64_t>(s) * blocks_per_seq,
                             pool_blocks.begin() + static_cast<int64_t>(s + 1) * blocks_per_seq);
          std::vector<std::span<const int32_t>> spans(tables.begin(), tables.end());
          const int64_t n_slots = static_cast<int64_t>(pool_blocks.size()) * block;
          auto slot_of = [&](size_t s, int64_t p) {
            return static_cast<int32_t>(tables[s][static_cast<size_t>(p / block)] * block + p % block);
          };

          // Every position up to each token's own is in the cache (written by the reference).
          KvPools pools(*ref_, n_slots, kv_dim, type);
          const KvLayerView kv{pools.k, pools.v, kv_dim, type};
          std::vector<int32_t> tok_seq, tok_pos, tok_slot;
          for (size_t s = 0; s < 3; ++s) {
            const int32_t last = parts[s].first_pos + parts[s].n - 1;
            std::vector<int32_t> fill_slot;
            for (int32_t p = 0; p <= last; ++p) fill_slot.push_back(slot_of(s, p));
            AttentionBatch fill;
            fill.n_tokens = static_cast<int64_t>(fill_slot.size());
            fill.token_slot = fill_slot.data();
            const std::vector<float> k = random_floats(rng_, fill.n_tokens * kv_dim, -2, 2);
            const std::vector<float> v = random_floats(rng_, fill.n_tokens * kv_dim, -2, 2);
            ref_->kv_write(kv, fill, k.data(), v.data());
            for (int32_t i = 0; i < parts[s].n; ++i) {
              tok_seq.push_back(static_cast<int32_t>(s));
              tok_pos.push_back(parts[s].first_pos + i);
              tok_slot.push_back(slot_of(s, parts[s].first_pos + i));
            }
          }
          const int64_t n_tok = static_cast<int64_t>(tok_seq.size());
          const AttentionBatch ab{n_tok, tok_seq.data(), tok_pos.data(), tok_slot.data(), spans, block};
          const std::vector<float> q = random_floats(rng_, n_tok * n_heads * hd, -2, 2);
          const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
          Buf qf(*fast_, q), of(*fast_, n_tok * n_heads * hd), qr(*ref_, q), orf(*ref_, n_tok * n_heads * hd);
          fast_->attention(kv, ab, qf.p, of.p, n_heads, n_kv, hd, scale, {});
          ref_->attention(kv, ab, qr.p, orf.p, n_heads, n_kv, hd, scale, {});
          const std::vector<float> got = of.get(), want = orf.get();

          // Bound per output element, from the K/V rows as both backends see them:
          // a score q.k * scale computed in f32 is within D = (hd + 2) u scale sum|q_i k_i|
          // of exact on each side, so the two backends' scores differ by <= 2D and the
          // softmax weights by a factor within exp(+-4D) ~ 1 +- 4D; exp itself adds its
          // relative error (kExpMaxRelError, or u for the C library) to numerator and sum;
          // the sums over n_pos positions, the per-tile rescaling and the final division add
          // at most 3 (n_pos + 2) u. The output is a weighted mean of V, so each relative
          // weight error becomes at most that fraction of max_p |v_p,i|.
          std::vector<float> krow(static_cast<size_t>(kv_dim)), vrow(static_cast<size_t>(kv_dim));
          for (int64_t t = 0; t < n_tok; ++t) {
            const size_t s = static_cast<size_t>(tok_seq[static_cast<size_t>(t)]);
            const int64_t n_pos = tok_pos[static_cast<size_t>(t)] + 1;
            for (int64_t h = 0; h < n_heads; ++h) {
              const int64_t kvh = h / ratio;
              const float* qh = q.data() + (t * n_heads + h) * hd;
              double d_max = 0;
              std::vector<double> vmax(static_cast<size_t>(hd), 0.0);
              for (int64_t p = 0; p < n_pos; ++p) {
                const size_t off = static_cast<size_t>(slot_of(s, p)) * kv.row_bytes();
                dequantize_row(type, reinterpret_cast<const uint8_t*>(pools.k) + off, krow.data(), kv_dim);
                dequantize_row(type, reinterpret_cast<const uint8_t*>(pools.v) + off, vrow.data(), kv_dim);
                double sabs = 0;
                for (int64_t i = 0; i < hd; ++i) {
                  sabs += std::fabs(double(qh[i]) * krow[static_cast<size_t>(kvh * hd + i)]);
                  vmax[static_cast<size_t>(i)] = std::max(vmax[static_cast<size_t>(i)], double(std::fabs(vrow[static_cast<size_t>(kvh * hd + i)])));
                }
                d_max = std::max(d_max, (hd + 2) * kU * scale * sabs);
              }
              const double rel = 4 * d_max + 2 * (cpu::kExpMaxRelError + kU) + 3 * (n_pos + 2) * kU;
              for (int64_t i = 0; i < hd; ++i) {
                const size_t at = static_cast<size_t>((t * n_heads + h) * hd + i);
                ASSERT_LE(std::fabs(double(got[at]) - want[at]), rel * vmax[static_cast<size_t>(i)])
                    << "token " << t << " head " << h << " element " << i << ": " << got[at] << " vs " << want[at];
              }
            }
          }
        }
      }
    }
  }
}

// Long contexts at real head sizes, where the AVX-512 kernel keeps a group's heads in the
// vector lanes (groups of 3 to 16 over f32/f16/bf16 K/V): decode tokens of one sequence whose
// lengths end mid-tile, on a tile's end (64 positions for heads of 64) and on a block's
// start, over many tiles of a block table scattered in the pool. Same bound as above,
// computed from the rows as both backends read them.
TEST_P(BackendOps, AttentionLongContextHeadsOf64And128) {
  struct Shape {
    int64_t head_dim, n_kv_heads, ratio;
  };
  // TinyLlama (8 q heads per kv head of 64), Llama 3 8B's ratio 4 at 128, a padded group
  // of 3 and a full group of 16.
  const std::vector<Shape> shapes = {{64, 4, 8}, {128, 1, 4}, {64, 1, 3}, {64, 1, 16}};
  // n_pos 701 (spans of 192, 192, 192, 125; the last tile of each mid-tile), 576 (3 spans of
  // 192: 3 tiles of 64 each), 321 (20 blocks and 1), 18 and 1.
  const std::vector<int32_t> positions = {700, 575, 320, 17, 0};
  const int64_t block = 16, n_pos_max = 701;
  for (DType type : {DType::F16, DType::BF16, DType::F32}) {
    for (const Shape& sh : shapes) {
      // bf16 and f32 differ from f16 only in the loads; f32 also has the groups of 3 (padding).
      if ((type == DType::BF16 && sh.ratio != 8) || (type == DType::F32 && sh.ratio != 8 && sh.ratio != 3)) continue;
      SCOPED_TRACE(std::string(dtype_name(type)) + " head_dim " + std::to_string(sh.head_dim) + " gqa " + std::to_string(sh.ratio));
      const int64_t hd = sh.head_dim, n_kv = sh.n_kv_heads, n_heads = n_kv * sh.ratio, kv_dim = n_kv * hd;
      const int64_t n_blocks = (n_pos_max + block - 1) / block;
      std::vector<int32_t> table(static_cast<size_t>(n_blocks));
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), rng_);
      const std::span<const int32_t> spans[1] = {table};
      auto slot_of = [&](int64_t p) { return static_cast<int32_t>(table[static_cast<size_t>(p / block)] * block + p % block); };
      KvPools pools(*ref_, n_blocks * block, kv_dim, type);
      const KvLayerView kv{pools.k, pools.v, kv_dim, type};
      std::vector<int32_t> fill_slot;
      for (int64_t p = 0; p < n_pos_max; ++p) fill_slot.push_back(slot_of(p));
      AttentionBatch fill;
      fill.n_tokens = n_pos_max;
      fill.token_slot = fill_slot.data();
      const std::vector<float> k = random_floats(rng_, n_pos_max * kv_dim, -2, 2);
      const std::vector<float> v = random_floats(rng_, n_pos_max * kv_dim, -2, 2);
      ref_->kv_write(kv, fill, k.data(), v.data());
      // The rows as stored (rounded to the K/V type), by position.
      std::vector<float> kf(k.size()), vf(v.size());
      for (int64_t p = 0; p < n_pos_max; ++p) {
        const size_t off = static_cast<size_t>(slot_of(p)) * kv.row_bytes();
        dequantize_row(type, reinterpret_cast<const uint8_t*>(pools.k) + off, kf.data() + p * kv_dim, kv_dim);
        dequantize_row(type, reinterpret_cast<const uint8_t*>(pools.v) + off, vf.data() + p * kv_dim, kv_dim);
      }
      const int64_t n_tok = static_cast<int64_t>(positions.size());
      const std::vector<int32_t> tok_seq(positions.size(), 0);
      std::vector<int32_t> tok_slot;
      for (int32_t p : positions) tok_slot.push_back(slot_of(p));
      const AttentionBatch ab{n_tok, tok_seq.data(), positions.data(), tok_slot.data(), spans, block};
      const std::vector<float> q = random_floats(rng_, n_tok * n_heads * hd, -2, 2);
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      Buf qf(*fast_, q), of(*fast_, n_tok * n_heads * hd), qr(*ref_, q), orf(*ref_, n_tok * n_heads * hd);
      fast_->attention(kv, ab, qf.p, of.p, n_heads, n_kv, hd, scale, {});
      ref_->attention(kv, ab, qr.p, orf.p, n_heads, n_kv, hd, scale, {});
      const std::vector<float> got = of.get(), want = orf.get();
      // A token alone gives the same bits as in the batch: alone, a decode token's spans are
      // the threads' chunks, merged after; in a batch of 5 on one thread a token is a chunk.
      for (int64_t t = 0; t < n_tok; ++t) {
        const AttentionBatch one{1, tok_seq.data(), positions.data() + t, tok_slot.data() + t, spans, block};
        Buf q1(*fast_, std::vector<float>(q.begin() + t * n_heads * hd, q.begin() + (t + 1) * n_heads * hd));
        Buf o1(*fast_, n_heads * hd);
        fast_->attention(kv, one, q1.p, o1.p, n_heads, n_kv, hd, scale, {});
        const std::vector<float> alone = o1.get();
        ASSERT_EQ(0, std::memcmp(alone.data(), got.data() + t * n_heads * hd, alone.size() * sizeof(float)))
            << "position " << positions[static_cast<size_t>(t)] << " alone differs from the batch";
      }
      for (int64_t t = 0; t < n_tok; ++t) {
        const int64_t n_pos = positions[static_cast<size_t>(t)] + 1;
        for (int64_t h = 0; h < n_heads; ++h) {
          const int64_t kvh = h / sh.ratio;
          const float* qh = q.data() + (t * n_heads + h) * hd;
          double d_max = 0;
          std::vector<double> vmax(static_cast<size_t>(hd), 0.0);
          for (int64_t p = 0; p < n_pos; ++p) {
            const float* kr = kf.data() + p * kv_dim + kvh * hd;
            const float* vr = vf.data() + p * kv_dim + kvh * hd;
            double sabs = 0;
            for (int64_t i = 0; i < hd; ++i) {
              sabs += std::fabs(double(qh[i]) * kr[i]);
              vmax[static_cast<size_t>(i)] = std::max(vmax[static_cast<size_t>(i)], double(std::fabs(vr[i])));
            }
            d_max = std::max(d_max, (hd + 2) * kU * scale * sabs);
          }
          const double rel = 4 * d_max + 2 * (cpu::kExpMaxRelError + kU) + 3 * (n_pos + 2) * kU;
          for (int64_t i = 0; i < hd; ++i) {
            const size_t at = static_cast<size_t>((t * n_heads + h) * hd + i);
            ASSERT_LE(std::fabs(double(got[at]) - want[at]), rel * vmax[static_cast<size_t>(i)])
                << "position " << n_pos - 1 << " head " << h << " element " << i << ": " << got[at] << " vs " << want[at];
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ThreadsAndIsas, BackendOps, ::testing::ValuesIn(configs()), config_name);

}  // namespace
}  // namespace th
