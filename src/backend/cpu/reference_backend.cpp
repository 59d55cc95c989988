// The reference backend: one plain implementation per op, single-threaded,
// written to be obviously right (matmul sums in f64). The fast CPU backend
// (cpu_backend.cpp) is tested against it op by op.
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/backend.h"
#include "tensor/quant.h"

namespace th {

namespace {

// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as gelu_pytorch_tanh.
float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

class ReferenceBackend final : public Backend {
 public:
  std::string_view name() const override { return "reference"; }

  float* alloc(int64_t n) override { return new float[static_cast<size_t>(n)](); }
  void free(float* p) override { delete[] p; }
  void read(const float* src, float* dst, int64_t n) override {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  }

  void matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens) override {
    const size_t rb = row_bytes(w.type, w.cols);
    const auto* base = static_cast<const uint8_t*>(w.data);
    row_.resize(static_cast<size_t>(w.cols));
    for (int64_t r = 0; r < w.rows; ++r) {
      const float* wr = row(w, base + r * rb);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const float* xt = x + t * w.cols;
        double acc = 0;  // f64 accumulation: the reference should not be the source of error
        for (int64_t c = 0; c < w.cols; ++c) acc += static_cast<double>(wr[c]) * xt[c];
        y[t * w.rows + r] = static_cast<float>(acc);
      }
    }
  }

  void embed(const WeightView& w, const int32_t* ids, int64_t n, float* out) override {
    const size_t rb = row_bytes(w.type, w.cols);
    const auto* base = static_cast<const uint8_t*>(w.data);
    row_.resize(static_cast<size_t>(w.cols));
    for (int64_t i = 0; i < n; ++i) {
      const float* r = row(w, base + static_cast<size_t>(ids[i]) * rb);
      std::memcpy(out + i * w.cols, r, static_cast<size_t>(w.cols) * sizeof(float));
    }
  }

  void rmsnorm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t dim,
               float eps) override {
    for (int64_t r = 0; r < n_rows; ++r) {
      const float* xr = x + r * dim;
      float* yr = y + r * dim;
      float ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += xr[i] * xr[i];
      const float scale = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
      for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * scale * weight[i];
    }
  }

  void rope(float* x, const int32_t* pos, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
            const RopeParams& p) override {
    const int64_t half = p.rot_dim / 2;
    inv_freq_.resize(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i) {
      float f = 1.0f / std::pow(p.freq_base, static_cast<float>(2 * i) / static_cast<float>(p.rot_dim));
      if (p.freq_factors) f /= p.freq_factors[i];
      inv_freq_[static_cast<size_t>(i)] = f;
    }
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float position = static_cast<float>(pos[t]) * p.freq_scale;
      for (int64_t h = 0; h < n_heads; ++h) {
        float* v = x + (t * n_heads + h) * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const float theta = position * inv_freq_[static_cast<size_t>(i)];
          const float c = std::cos(theta), s = std::sin(theta);
          const int64_t a = p.neox ? i : 2 * i;
          const int64_t b = p.neox ? i + half : 2 * i + 1;
          const float x0 = v[a], x1 = v[b];
          v[a] = x0 * c - x1 * s;
          v[b] = x0 * s + x1 * c;
        }
      }
    }
  }

  void swiglu(const float* gate, const float* up, float* out, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
  }

  void geglu(const float* gate, const float* up, float* out, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) out[i] = gelu_tanh(gate[i]) * up[i];
  }

  void softcap(float* y, int64_t n, float cap) override {
    for (int64_t i = 0; i < n; ++i) y[i] = cap * std::tanh(y[i] / cap);
  }

  void scale(float* y, int64_t n, float s) override {
    for (int64_t i = 0; i < n; ++i) y[i] *= s;
  }

  void add_rows_scaled(float* dst, const float* src, const int32_t* idx, const float* w, int64_t n,
                       int64_t dim) override {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < dim; ++j) dst[static_cast<int64_t>(idx[i]) * dim + j] += w[i] * src[i * dim + j];
  }

  void gather_rows(const float* src, const int32_t* idx, int64_t n, int64_t dim, float* dst) override {
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(dst + i * dim, src + static_cast<int64_t>(idx[i]) * dim, static_cast<size_t>(dim) * sizeof(float));
  }

  void add(float* y, const float* x, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
  }

  void add_bias(float* y, const float* bias, int64_t n_rows, int64_t dim) override {
    for (int64_t r = 0; r < n_rows; ++r)
      for (int64_t i = 0; i < dim; ++i) y[r * dim + i] += bias[i];
  }

  void kv_write(const KvLayerView& kv, const AttentionBatch& b, const float* k, const float* v) override {
    const size_t rb = kv.row_bytes();
    for (int64_t t = 0; t < b.n_tokens; ++t) {
      const size_t at = static_cast<size_t>(b.token_slot[t]) * rb;
      quantize_row(kv.type, k + t * kv.kv_dim, static_cast<uint8_t*>(kv.k) + at, kv.kv_dim);
      quantize_row(kv.type, v + t * kv.kv_dim, static_cast<uint8_t*>(kv.v) + at, kv.kv_dim);
    }
  }

  void attention(const KvLayerView& kv, const AttentionBatch& b, const float* q, float* out,
                 int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                 const AttentionOptions& opt) override {
    const int64_t group = n_heads / n_kv_heads;
    const size_t rb = kv.row_bytes();
    kv_row_.resize(static_cast<size_t>(kv.kv_dim));
    for (int64_t t = 0; t < b.n_tokens; ++t) {
      const std::span<const int32_t> table = b.seq_tables[static_cast<size_t>(b.token_seq[t])];
      const int64_t n_pos = b.token_pos[t] + 1;
      // Positions before `first` are outside the sliding window: they get no weight at all.
      const int64_t first = opt.window > 0 ? std::max<int64_t>(0, n_pos - opt.window) : 0;
      scores_.resize(static_cast<size_t>(n_pos));
      for (int64_t h = 0; h < n_heads; ++h) {
        const float* qh = q + (t * n_heads + h) * head_dim;
        const int64_t kvh = h / group;
        float mx = -INFINITY;
        for (int64_t p = first; p < n_pos; ++p) {
          const float* kp = kv_row(kv.k, kv, rb, kv_slot(table, b.block_size, p)) + kvh * head_dim;
          float s = 0;
          for (int64_t i = 0; i < head_dim; ++i) s += qh[i] * kp[i];
          s *= scale;
          if (opt.softcap > 0) s = opt.softcap * std::tanh(s / opt.softcap);
          scores_[static_cast<size_t>(p)] = s;
          mx = std::max(mx, s);
        }
        float sum = 0;
        for (int64_t p = first; p < n_pos; ++p) {
          const float e = std::exp(scores_[static_cast<size_t>(p)] - mx);
          scores_[static_cast<size_t>(p)] = e;
          sum += e;
        }
        float* oh = out + (t * n_heads + h) * head_dim;
        std::fill(oh, oh + head_dim, 0.0f);
        for (int64_t p = first; p < n_pos; ++p) {
          const float* vp = kv_row(kv.v, kv, rb, kv_slot(table, b.block_size, p)) + kvh * head_dim;
          const float wgt = scores_[static_cast<size_t>(p)] / sum;
          for (int64_t i = 0; i < head_dim; ++i) oh[i] += wgt * vp[i];
        }
      }
    }
  }

 private:
  // The K or V row of a slot as f32 (dequantized into kv_row_ unless the cache is f32).
  const float* kv_row(const void* pool, const KvLayerView& kv, size_t rb, int64_t slot) {
    const uint8_t* src = static_cast<const uint8_t*>(pool) + static_cast<size_t>(slot) * rb;
    if (kv.type == DType::F32) return reinterpret_cast<const float*>(src);
    dequantize_row(kv.type, src, kv_row_.data(), kv.kv_dim);
    return kv_row_.data();
  }

  // A row of w as f32: the data itself for F32, else dequantized into row_.
  const float* row(const WeightView& w, const uint8_t* src) {
    if (w.type == DType::F32) return reinterpret_cast<const float*>(src);
    dequantize_row(w.type, src, row_.data(), w.cols);
    return row_.data();
  }

  std::vector<float> row_, inv_freq_, scores_, kv_row_;
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace th
