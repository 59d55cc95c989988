// The arithmetic a request computes in, and which weight format each one means. A server
// holds one copy of the weights per compute type it loaded (LlamaModel::add_compute_type);
// a request picks one, and a sequence keeps it for its whole life.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"

namespace th {

/// @brief Auto: the server's default. Native: the file's own weights as stored (quantized
/// types dequantized as the kernels compute). The others: the weights converted once at load
/// to f32, f16, bf16 or FP8_E4M3 blocks (tensor/fp8.h); activations stay f32 between ops.
enum class ComputeType : uint8_t { Auto, Fp32, Fp16, Bf16, Fp8, Native };

std::string_view compute_type_name(ComputeType t);
/// @brief "auto", "fp32", "fp16", "bf16", "fp8" or "native"; nullopt for anything else.
std::optional<ComputeType> parse_compute_type(std::string_view name);
/// @brief The list "fp32,bf16,..." (each a concrete type: auto is refused, duplicates dropped).
std::optional<std::vector<ComputeType>> parse_compute_type_list(std::string_view list, std::string* error);
/// @brief The weight format of a converted copy (F32, F16, BF16, FP8_E4M3); Auto and Native have none.
std::optional<DType> compute_type_weight_dtype(ComputeType t);
/// @brief "native, fp32, bf16": a list for messages.
std::string compute_type_list_text(const std::vector<ComputeType>& types);

}  // namespace th
