// Generic activation conversion and the helpers every ISA's kernels share.
#include "backend/cpu/act_q8.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "tensor/half.h"
#include "tensor/quant.h"

namespace th::cpu {

void convert_act_q8_0_generic(const float* x, void* dst, int64_t n) { quantize_row(DType::Q8_0, x, dst, n); }

void convert_act_f32(const float* x, void* dst, int64_t n) {
  std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
}

const float* f16_table() {
  static const float* table = [] {
    auto* t = new float[65536];
    for (uint32_t h = 0; h < 65536; ++h) t[h] = f16_to_f32(static_cast<uint16_t>(h));
    return t;
  }();
  return table;
}

namespace {
struct Scratch {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data;
  size_t size = 0;
};
}  // namespace

float* thread_scratch(int slot, size_t n) {
  thread_local Scratch slots[4];
  Scratch& s = slots[slot];
  if (s.size < n) {
    // Round up to whole cache lines (aligned_alloc wants a multiple of the alignment).
    const size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (p == nullptr) throw std::bad_alloc();
    s.data.reset(p);
    s.size = bytes / sizeof(float);
  }
  return s.data.get();
}

}  // namespace th::cpu
