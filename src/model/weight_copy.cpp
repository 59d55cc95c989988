#include "model/weight_copy.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tensor/quant.h"

namespace th {

void WeightStorage::Free::operator()(uint8_t* p) const { std::free(p); }

namespace {

// The first value of a row that the target cannot hold, or -1.
int64_t first_bad(const float* x, int64_t n, DType to) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return i;
    if (to == DType::F16 && std::fabs(x[i]) > 65504.0f) return i;
  }
  return -1;
}

}  // namespace

Result<WeightView> convert_weight(const WeightView& w, DType to, std::string_view name, int threads,
                                  WeightStorage* out) {
  const DTypeInfo& ti = dtype_info(to);
  if (w.cols % ti.block_size != 0)
    return Status::errorf("tensor ", name, " has rows of ", w.cols, " values, not a multiple of ", dtype_name(to),
                          "'s block of ", ti.block_size);
  const size_t in_row = row_bytes(w.type, w.cols), out_row = row_bytes(to, w.cols);
  const size_t bytes = out_row * static_cast<size_t>(w.rows);
  // aligned_alloc wants a multiple of the alignment.
  out->data.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
  if (!out->data) return Status::errorf("tensor ", name, ": out of memory for ", bytes, " bytes of ", dtype_name(to));
  out->bytes = bytes;

  std::atomic<int64_t> next{0}, bad_row{-1};
  std::atomic<int64_t> bad_col{0};
  std::atomic<float> bad_value{0};
  auto work = [&] {
    std::vector<float> row(static_cast<size_t>(w.cols));
    constexpr int64_t kRows = 64;
    for (int64_t r0 = next.fetch_add(kRows); r0 < w.rows && bad_row.load() < 0; r0 = next.fetch_add(kRows)) {
      for (int64_t r = r0; r < std::min(w.rows, r0 + kRows); ++r) {
        dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + r * in_row, row.data(), w.cols);
        if (to != DType::F32) {
          if (const int64_t c = first_bad(row.data(), w.cols, to); c >= 0) {
            int64_t none = -1;
            if (bad_row.compare_exchange_strong(none, r)) {
              bad_col.store(c);
              bad_value.store(row[static_cast<size_t>(c)]);
            }
            return;
          }
        }
        quantize_row(to, row.data(), out->data.get() + r * out_row, w.cols);
      }
    }
  };
  const int n = std::clamp<int>(threads, 1, static_cast<int>(std::max<int64_t>(1, w.rows / 64)));
  std::vector<std::thread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (bad_row.load() >= 0)
    return Status::errorf("tensor ", name, " holds ", bad_value.load(), " at row ", bad_row.load(), ", column ",
                          bad_col.load(), ", which ", dtype_name(to), " cannot represent",
                          to == DType::F16 ? " (f16's largest finite value is 65504)" : "");
  return WeightView{to, w.rows, w.cols, out->data.get()};
}

}  // namespace th
