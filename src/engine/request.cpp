#include "engine/request.h"

namespace th {

std::string_view compute_type_name(ComputeType t) {
  switch (t) {
    case ComputeType::Auto: return "auto";
    case ComputeType::Fp32: return "fp32";
    case ComputeType::Fp16: return "fp16";
    case ComputeType::Bf16: return "bf16";
    case ComputeType::Fp8: return "fp8";
  }
  return "?";
}

}  // namespace th
