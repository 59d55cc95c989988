// A weight matrix converted to another format once, at load: what a compute type's copy
// of the weights (LlamaModel::add_compute_type) is made of.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "backend/backend.h"
#include "base/status.h"

namespace th {

/// @brief Owned bytes of converted weights, 64-byte aligned (the kernels' loads).
struct WeightStorage {
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> data;
  size_t bytes = 0;
};

/// @brief w converted to `to` (through f32: dequantize_row, then quantize_row), in `out`.
/// Refused, naming `name` and the value, when a value is not finite (every target) or beyond
/// f16's largest finite 65504 (F16), or when a row is not a whole number of `to`'s blocks.
/// Rows are split across up to `threads` threads.
Result<WeightView> convert_weight(const WeightView& w, DType to, std::string_view name, int threads,
                                  WeightStorage* out);

}  // namespace th
