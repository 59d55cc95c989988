// The types a KV cache can hold, and their names on the command line
// (`--kv-dtype`): one list for every verb.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"

namespace th {

inline constexpr std::array<DType, 4> kKvDtypes = {DType::F32, DType::F16, DType::BF16, DType::Q8_0};

/// @brief "f32", "f16", "bf16", "q8_0" (ggml's names), in that order.
inline std::vector<std::string> kv_dtype_names() {
  std::vector<std::string> names;
  for (DType t : kKvDtypes) names.emplace_back(dtype_name(t));
  return names;
}

/// @brief The KV type named `name`; nullopt for a type the cache cannot hold.
inline std::optional<DType> kv_dtype_from_name(std::string_view name) {
  for (DType t : kKvDtypes)
    if (dtype_name(t) == name) return t;
  return std::nullopt;
}

}  // namespace th
