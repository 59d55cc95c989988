// Priority names, one definition for the API, the key file, the router and the
// benchmark: "high", "normal", "low" are -1, 0, 1; any int32 works too, lower
// value = more important (vLLM's form).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace th {

enum class Priority : int32_t { High = -1, Normal = 0, Low = 1 };

/// @brief -1, 0, 1 for "high", "normal", "low"; nullopt for anything else.
inline std::optional<int32_t> priority_from_name(std::string_view name) {
  if (name == "high") return static_cast<int32_t>(Priority::High);
  if (name == "normal") return static_cast<int32_t>(Priority::Normal);
  if (name == "low") return static_cast<int32_t>(Priority::Low);
  return std::nullopt;
}

/// @brief "high", "normal", "low" for -1, 0, 1, else the number.
inline std::string priority_name(int32_t priority) {
  switch (priority) {
    case static_cast<int32_t>(Priority::High): return "high";
    case static_cast<int32_t>(Priority::Normal): return "normal";
    case static_cast<int32_t>(Priority::Low): return "low";
    default: return std::to_string(priority);
  }
}

}  // namespace th
