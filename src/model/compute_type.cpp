#include "model/compute_type.h"

#include <algorithm>

namespace th {

namespace {
constexpr ComputeType kAll[] = {ComputeType::Auto, ComputeType::Fp32, ComputeType::Fp16,
                                ComputeType::Bf16, ComputeType::Fp8,  ComputeType::Native};
}  // namespace

std::string_view compute_type_name(ComputeType t) {
  switch (t) {
    case ComputeType::Auto: return "auto";
    case ComputeType::Fp32: return "fp32";
    case ComputeType::Fp16: return "fp16";
    case ComputeType::Bf16: return "bf16";
    case ComputeType::Fp8: return "fp8";
    case ComputeType::Native: return "native";
  }
  return "?";
}

std::optional<ComputeType> parse_compute_type(std::string_view name) {
  for (ComputeType t : kAll)
    if (compute_type_name(t) == name) return t;
  return std::nullopt;
}

std::optional<std::vector<ComputeType>> parse_compute_type_list(std::string_view list, std::string* error) {
  std::vector<ComputeType> out;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string_view item = list.substr(at, comma - at);
    const std::optional<ComputeType> t = parse_compute_type(item);
    if (!t || *t == ComputeType::Auto) {
      *error = "'" + std::string(item) + "' is not a compute type (fp32, fp16, bf16, fp8, native)";
      return std::nullopt;
    }
    if (std::find(out.begin(), out.end(), *t) == out.end()) out.push_back(*t);
    at = comma + 1;
  }
  return out;
}

std::optional<DType> compute_type_weight_dtype(ComputeType t) {
  switch (t) {
    case ComputeType::Fp32: return DType::F32;
    case ComputeType::Fp16: return DType::F16;
    case ComputeType::Bf16: return DType::BF16;
    case ComputeType::Fp8: return DType::FP8_E4M3;
    default: return std::nullopt;
  }
}

std::string compute_type_list_text(const std::vector<ComputeType>& types) {
  std::string s;
  for (ComputeType t : types) s += (s.empty() ? "" : ", ") + std::string(compute_type_name(t));
  return s;
}

}  // namespace th
