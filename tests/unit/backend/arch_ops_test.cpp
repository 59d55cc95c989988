// The ops the newer architectures added (GeGLU, soft-capping, scale, the
// experts' weighted row adds, attention's sliding window and score soft-cap),
// in the reference backend and the CPU backend (1 and 3 threads), each against
// a direct computation in f64 written here from the formula.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "test_numeric.h"

namespace th {
namespace {

using test::random_floats;

struct Named {
  std::string name;
  std::unique_ptr<Backend> b;
};

std::vector<Named> backends() {
  std::vector<Named> v;
  v.push_back({"reference", make_reference_backend()});
  for (int t : {1, 3}) {
    CpuBackendOptions o;
    o.n_threads = t;
    v.push_back({"cpu_t" + std::to_string(t), make_cpu_backend(o)});
  }
  return v;
}

// A backend buffer holding v; read back with get().
struct Buf {
  Backend* b;
  float* p;
  int64_t n;
  Buf(Backend& be, const std::vector<float>& v) : b(&be), p(be.alloc(static_cast<int64_t>(v.size()))), n(static_cast<int64_t>(v.size())) {
    std::memcpy(p, v.data(), v.size() * sizeof(float));
  }
  ~Buf() { b->free(p); }
  Buf(const Buf&) = delete;
  std::vector<float> get() const {
    std::vector<float> out(static_cast<size_t>(n));
    b->read(p, out.data(), n);
    return out;
  }
};

double gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

// Elementwise ops: f32 evaluation of tanh/exp is within a few units of rounding (2^-24) of
// exact; 1e-6 relative to the magnitudes here (|x| <= 8) is several times that.
TEST(ArchOps, ElementwiseOpsMatchTheirFormulas) {
  std::mt19937 rng(7);
  const int64_t n = 1037;  // odd: no vector width divides it
  const std::vector<float> g = random_floats(rng, n, -8, 8), u = random_floats(rng, n, -2, 2);
  for (Named& nb : backends()) {
    SCOPED_TRACE(nb.name);
    Backend& b = *nb.b;
    Buf gate(b, g), up(b, u), out(b, std::vector<float>(static_cast<size_t>(n)));
    b.geglu(gate.p, up.p, out.p, n);
    std::vector<float> got = out.get();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(got[i], gelu_tanh(g[i]) * u[i], 1e-6 * (1 + std::fabs(g[i] * u[i]))) << i;
    Buf y(b, g);
    b.softcap(y.p, n, 3.0f);
    got = y.get();
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], 3.0 * std::tanh(g[i] / 3.0), 1e-6) << i;
    b.scale(y.p, n, -2.5f);
    const std::vector<float> scaled = y.get();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(scaled[i], got[i] * -2.5f) << i;  // one rounding, exact
  }
}

TEST(ArchOps, AddRowsScaledAddsEachRowToItsTarget) {
  std::mt19937 rng(8);
  const int64_t dim = 67, n_dst = 9;
  const std::vector<int32_t> idx = {4, 0, 8, 3};
  const std::vector<float> w = {0.25f, -1.5f, 0.75f, 2.0f};
  const std::vector<float> dst0 = random_floats(rng, n_dst * dim, -1, 1);
  const std::vector<float> src = random_floats(rng, 4 * dim, -1, 1);
  for (Named& nb : backends()) {
    SCOPED_TRACE(nb.name);
    Buf d(*nb.b, dst0), s(*nb.b, src);
    nb.b->add_rows_scaled(d.p, s.p, idx.data(), w.data(), 4, dim);
    const std::vector<float> got = d.get();
    std::vector<float> want = dst0;
    for (size_t i = 0; i < idx.size(); ++i)
      for (int64_t j = 0; j < dim; ++j) want[idx[i] * dim + j] += w[i] * src[i * dim + j];
    // One multiply-add per element: fused or not, within 2 roundings (|values| <= 3: 1e-6).
    for (int64_t i = 0; i < n_dst * dim; ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << i;
  }
}

// Attention with a sliding window and a score soft-cap, against softmax over exactly the
// window's positions in f64. One sequence of 41 positions in blocks of 4 (the window's first
// position falls inside a block), GQA 2, f32 cache. Scores are O(1), so exp and the sums
// in f32 are within ~1e-6 of exact; the bound 2e-5 leaves room for 41-term sums.
TEST(ArchOps, AttentionHonoursWindowAndSoftcap) {
  std::mt19937 rng(9);
  const int64_t hd = 16, n_kv = 2, n_heads = 4, kv_dim = n_kv * hd, n_pos = 41, block = 4;
  const int64_t n_blocks = (n_pos + block - 1) / block;
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  for (int64_t i = 0; i < n_blocks; ++i) table[static_cast<size_t>(i)] = static_cast<int32_t>(n_blocks - 1 - i);
  const std::vector<std::span<const int32_t>> tables = {table};
  const std::vector<float> k = random_floats(rng, n_pos * kv_dim, -2, 2), v = random_floats(rng, n_pos * kv_dim, -2, 2);
  std::vector<int32_t> all_slot(static_cast<size_t>(n_pos)), all_pos(static_cast<size_t>(n_pos)),
      all_seq(static_cast<size_t>(n_pos), 0);
  for (int64_t p = 0; p < n_pos; ++p) {
    all_pos[static_cast<size_t>(p)] = static_cast<int32_t>(p);
    all_slot[static_cast<size_t>(p)] = static_cast<int32_t>(table[static_cast<size_t>(p / block)] * block + p % block);
  }
  // Queries at a few positions: before the window fills, at its edge, and past it.
  const std::vector<int32_t> q_pos = {0, 3, 6, 17, 40};
  const int64_t nq = static_cast<int64_t>(q_pos.size());
  std::vector<int32_t> q_slot, q_seq(static_cast<size_t>(nq), 0);
  for (int32_t p : q_pos) q_slot.push_back(all_slot[static_cast<size_t>(p)]);
  const std::vector<float> q = random_floats(rng, nq * n_heads * hd, -1, 1);
  const float scale = 0.7f;
  for (const AttentionOptions opt : {AttentionOptions{7, 0.0f}, AttentionOptions{0, 1.5f}, AttentionOptions{4, 0.8f}}) {
    SCOPED_TRACE("window " + std::to_string(opt.window) + " softcap " + std::to_string(opt.softcap));
    // What each backend must produce.
    std::vector<double> want(static_cast<size_t>(nq * n_heads * hd), 0.0);
    for (int64_t t = 0; t < nq; ++t) {
      const int64_t pos = q_pos[static_cast<size_t>(t)];
      const int64_t first = opt.window > 0 ? std::max<int64_t>(0, pos - opt.window + 1) : 0;
      for (int64_t h = 0; h < n_heads; ++h) {
        const int64_t kvh = h / (n_heads / n_kv);
        std::vector<double> s;
        for (int64_t p = first; p <= pos; ++p) {
          double d = 0;
          for (int64_t i = 0; i < hd; ++i) d += double(q[(t * n_heads + h) * hd + i]) * k[p * kv_dim + kvh * hd + i];
          d *= scale;
          if (opt.softcap > 0) d = opt.softcap * std::tanh(d / opt.softcap);
          s.push_back(d);
        }
        double mx = -1e300, sum = 0;
        for (double x : s) mx = std::max(mx, x);
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (int64_t p = first; p <= pos; ++p)
          for (int64_t i = 0; i < hd; ++i)
            want[static_cast<size_t>((t * n_heads + h) * hd + i)] += s[static_cast<size_t>(p - first)] / sum * v[p * kv_dim + kvh * hd + i];
      }
    }
    for (Named& nb : backends()) {
      SCOPED_TRACE(nb.name);
      Backend& b = *nb.b;
      Buf kpool(b, std::vector<float>(static_cast<size_t>(n_blocks * block * kv_dim)));
      Buf vpool(b, std::vector<float>(static_cast<size_t>(n_blocks * block * kv_dim)));
      const KvLayerView kv{kpool.p, vpool.p, kv_dim, DType::F32};
      const AttentionBatch fill{n_pos, all_seq.data(), all_pos.data(), all_slot.data(), tables, block};
      Buf kb(b, k), vb(b, v);
      b.kv_write(kv, fill, kb.p, vb.p);
      const AttentionBatch ab{nq, q_seq.data(), q_pos.data(), q_slot.data(), tables, block};
      Buf qb(b, q), out(b, std::vector<float>(q.size()));
      b.attention(kv, ab, qb.p, out.p, n_heads, n_kv, hd, scale, opt);
      const std::vector<float> got = out.get();
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5) << i;
    }
  }
}

}  // namespace
}  // namespace th
