// Q8_K reference conversion and the plain C++ panel multiply cores (the generic
// variants of the q4_K, q5_K and q6_K kernels, and what the SIMD ones are
// tested against).
#include "backend/cpu/act_q8k.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "tensor/quant_blocks.h"

namespace th::cpu {

namespace {

constexpr size_t kQ8KBytes = sizeof(BlockQ8_K);

// ggml's nearest_int (round half to even) of x / d, which lies in -127..127 up to rounding
// for every sane block. The rest is defined the way the AVX2 conversion computes it: NaN
// (inf * 0, from an inf in the block) gives 0, and values past int8 (a denormal block
// maximum makes -127 / max overflow to inf) saturate; ggml asserts on those instead.
int nearest_int(float v) {
  if (std::isnan(v)) return 0;
  return static_cast<int>(std::nearbyint(std::fmin(std::fmax(v, -128.0f), 127.0f)));
}

}  // namespace

void quantize_row_q8_k_ref(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK, out += kQ8KBytes) {
    BlockQ8_K b{};
    float max = 0, amax = 0;
    for (int j = 0; j < kQKK; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {  // strict: the first value of largest magnitude wins; NaNs never do
        amax = ax;
        max = x[j];
      }
    }
    if (amax != 0.0f) {
      // -127 / max rather than 127 / amax: ggml's choice, so the block's largest value
      // always lands on -127 and the bytes match llama.cpp's.
      const float iscale = -127.f / max;
      for (int j = 0; j < kQKK; ++j) {
        b.qs[j] = static_cast<int8_t>(nearest_int(iscale * x[j]));
      }
      for (int g = 0; g < kQKK / 16; ++g) {
        int sum = 0;
        for (int l = 0; l < 16; ++l) sum += b.qs[16 * g + l];
        b.bsums[g] = static_cast<int16_t>(sum);
      }
      b.d = 1 / iscale;
    }
    std::memcpy(out, &b, kQ8KBytes);
  }
}

void dequantize_row_q8_k(const void* src, float* dst, int64_t n) {
  const auto* in = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n / kQKK; ++i, in += kQ8KBytes, dst += kQKK) {
    BlockQ8_K b;
    std::memcpy(&b, in, kQ8KBytes);
    for (int j = 0; j < kQKK; ++j) dst[j] = b.d * b.qs[j];
  }
}

void* q8k_scratch(int slot, size_t bytes) {
  struct Buffer {
    std::unique_ptr<uint8_t[]> mem;
    size_t cap = 0;
  };
  thread_local Buffer buffers[2];
  Buffer& b = buffers[slot];
  if (b.cap < bytes) {
    b.mem = std::make_unique<uint8_t[]>(bytes + 64);
    b.cap = bytes;
  }
  const auto addr = reinterpret_cast<uintptr_t>(b.mem.get());
  return b.mem.get() + ((64 - addr % 64) % 64);
}

void unpack_k4_scales(const uint8_t* scales12, float d, float dmin, PanelK4& p) {
  // ggml's four-word shuffle of the 6-bit fields (see scale_min_k4 in tensor/quant.cpp):
  // afterwards bytes 0-7 hold the scales, bytes 8-15 the mins.
  constexpr uint32_t kMask6 = 0x3f3f3f3f, kMask4 = 0x0f0f0f0f, kMask2 = 0x03030303;
  uint32_t u[4];
  std::memcpy(u, scales12, 12);
  u[3] = ((u[2] >> 4) & kMask4) | (((u[1] >> 6) & kMask2) << 4);
  const uint32_t mins_lo = u[1] & kMask6;
  u[1] = (u[2] & kMask4) | (((u[0] >> 6) & kMask2) << 4);
  u[2] = mins_lo;
  u[0] &= kMask6;
  uint8_t bytes[16];
  std::memcpy(bytes, u, 16);
  for (int j = 0; j < 8; ++j) {
    p.sc[j][0] = p.sc[j][1] = bytes[j];
    p.mins[j] = -dmin * bytes[8 + j];
  }
  p.d = d;
}

template <class Panel>
void gemm_via_panels(void (*unpack)(const uint8_t* row, int64_t nb, Panel* out),
                     void (*core)(const Panel* panel, int64_t rows, int64_t nb, const uint8_t* act,
                                  size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride),
                     const uint8_t* w, size_t w_row_bytes, int64_t cols, int64_t r0, int64_t r1, const uint8_t* act,
                     size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  if (n_tokens <= 0 || r1 <= r0) return;
  const int64_t nb = cols / kQKK;
  auto* panel = static_cast<Panel*>(q8k_scratch(0, sizeof(Panel) * static_cast<size_t>(kPanelRows * nb)));
  for (int64_t rp = r0; rp < r1; rp += kPanelRows) {
    const int64_t m = std::min(kPanelRows, r1 - rp);
    for (int64_t i = 0; i < m; ++i) unpack(w + (rp + i) * w_row_bytes, nb, panel + i * nb);
    core(panel, m, nb, act, act_row_bytes, n_tokens, y + rp, y_stride);
  }
}

template void gemm_via_panels<PanelK4>(void (*)(const uint8_t*, int64_t, PanelK4*),
                                       void (*)(const PanelK4*, int64_t, int64_t, const uint8_t*, size_t, int64_t,
                                                float*, int64_t),
                                       const uint8_t*, size_t, int64_t, int64_t, int64_t, const uint8_t*, size_t,
                                       int64_t, float*, int64_t);
template void gemm_via_panels<PanelK2>(void (*)(const uint8_t*, int64_t, PanelK2*),
                                       void (*)(const PanelK2*, int64_t, int64_t, const uint8_t*, size_t, int64_t,
                                                float*, int64_t),
                                       const uint8_t*, size_t, int64_t, int64_t, int64_t, const uint8_t*, size_t,
                                       int64_t, float*, int64_t);
template void gemm_via_panels<PanelK6>(void (*)(const uint8_t*, int64_t, PanelK6*),
                                       void (*)(const PanelK6*, int64_t, int64_t, const uint8_t*, size_t, int64_t,
                                                float*, int64_t),
                                       const uint8_t*, size_t, int64_t, int64_t, int64_t, const uint8_t*, size_t,
                                       int64_t, float*, int64_t);

// The generic cores: one row against one token at a time, integer sums per sub-block as
// the SIMD cores compute them, so their results differ only in float summation order.

namespace {

struct ActBlock {
  float d;
  const int8_t* qs;
  int16_t bsums[16];
};

ActBlock act_block(const uint8_t* p) {
  ActBlock a;
  std::memcpy(&a.d, p, sizeof(float));
  a.qs = reinterpret_cast<const int8_t*>(p + offsetof(BlockQ8_K, qs));
  std::memcpy(a.bsums, p + offsetof(BlockQ8_K, bsums), sizeof(a.bsums));
  return a;
}

}  // namespace

void panel_gemm_k4_generic(const PanelK4* panel, int64_t rows, int64_t nb, const uint8_t* act,
                           size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  for (int64_t r = 0; r < rows; ++r) {
    const PanelK4* row = panel + r * nb;
    for (int64_t t = 0; t < n_tokens; ++t) {
      const uint8_t* a_row = act + t * act_row_bytes;
      float sum = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const PanelK4& p = row[b];
        const ActBlock a = act_block(a_row + b * kQ8KBytes);
        int32_t isum = 0;
        float msum = 0;
        for (int j = 0; j < 8; ++j) {
          int32_t s = 0;
          for (int l = 0; l < 32; ++l) s += p.q[32 * j + l] * a.qs[32 * j + l];
          isum += p.sc[j][0] * s;
          msum += p.mins[j] * (a.bsums[2 * j] + a.bsums[2 * j + 1]);
        }
        sum += p.d * a.d * static_cast<float>(isum) + a.d * msum;
      }
      y[t * y_stride + r] = sum;
    }
  }
}

void panel_gemm_k6_generic(const PanelK6* panel, int64_t rows, int64_t nb, const uint8_t* act,
                           size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  for (int64_t r = 0; r < rows; ++r) {
    const PanelK6* row = panel + r * nb;
    for (int64_t t = 0; t < n_tokens; ++t) {
      const uint8_t* a_row = act + t * act_row_bytes;
      float sum = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const PanelK6& p = row[b];
        const ActBlock a = act_block(a_row + b * kQ8KBytes);
        int32_t isum = 0;
        for (int g = 0; g < 16; ++g) {
          int32_t s = 0;
          for (int l = 0; l < 16; ++l) s += p.q[16 * g + l] * a.qs[16 * g + l];
          isum += p.sc[g / 2][8 * (g % 2)] * s - p.m32[g] * a.bsums[g];
        }
        sum += p.d * a.d * static_cast<float>(isum);
      }
      y[t * y_stride + r] = sum;
    }
  }
}

void panel_gemm_k2_generic(const PanelK2* panel, int64_t rows, int64_t nb, const uint8_t* act,
                           size_t act_row_bytes, int64_t n_tokens, float* y, int64_t y_stride) {
  for (int64_t r = 0; r < rows; ++r) {
    const PanelK2* row = panel + r * nb;
    for (int64_t t = 0; t < n_tokens; ++t) {
      const uint8_t* a_row = act + t * act_row_bytes;
      float sum = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const PanelK2& p = row[b];
        const ActBlock a = act_block(a_row + b * kQ8KBytes);
        int32_t isum = 0, msum = 0;
        for (int g = 0; g < 16; ++g) {
          int32_t s = 0;
          for (int l = 0; l < 16; ++l) s += p.q[16 * g + l] * a.qs[16 * g + l];
          isum += p.sc[g / 2][8 * (g % 2)] * s;
          msum += p.mins[g] * a.bsums[g];
        }
        sum += p.d * a.d * static_cast<float>(isum) - p.dmin * a.d * static_cast<float>(msum);
      }
      y[t * y_stride + r] = sum;
    }
  }
}

}  // namespace th::cpu
