// Element types of tensors, numbered as GGUF/ggml numbers them, with their
// block layout: a row of n elements of a block type takes
// n / block_size * type_size bytes.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace th {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ4_NL = 20,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
};

struct DTypeInfo {
  DType type;
  std::string_view name;  // as ggml names it: "f32", "q4_K", ...
  uint32_t block_size;    // elements per block (1 for plain types)
  uint32_t type_size;     // bytes per block
  bool can_dequantize;    // tokenhive has a dequantizer for it
};

/// @brief The layout of a raw GGUF type id, or nullptr for an id tokenhive does not know.
const DTypeInfo* dtype_info(uint32_t raw_type);
/// @brief The layout of a DType; every enumerator is in the table (a unit test checks it).
inline const DTypeInfo& dtype_info(DType t) {
  const DTypeInfo* i = dtype_info(static_cast<uint32_t>(t));
  assert(i && "DType outside the table");
  return *i;
}
inline std::string_view dtype_name(DType t) { return dtype_info(t).name; }

/// @brief Bytes in a row of n elements; n must be a multiple of the block size.
inline size_t row_bytes(DType t, int64_t n) {
  const DTypeInfo& i = dtype_info(t);
  assert(n >= 0 && n % i.block_size == 0);
  return static_cast<size_t>(n) / i.block_size * i.type_size;
}

}  // namespace th
