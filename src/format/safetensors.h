// The safetensors format (Hugging Face): an 8-byte little-endian header length,
// a JSON header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the data. The parser checks every extent against the bytes there (offsets inside
// the data, size = product of the shape x element size, no two tensors overlapping), so a
// bad file is one line naming it and the tensor, never a crash; fuzzed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"
#include "tensor/dtype.h"

namespace th {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;           // as the file names it: "F32", "BF16", "I64", ...
  bool supported = false;      // dtype is F32, F16 or BF16 (then `type` holds it)
  DType type = DType::F32;
  std::vector<int64_t> shape;  // outermost first, as the file (and PyTorch) lists it
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
};

/// @brief The tensors of an in-memory image (not copied; it must outlive the result).
/// `name` prefixes every error.
Result<std::vector<SafetensorsTensor>> parse_safetensors(const uint8_t* data, size_t size, const std::string& name);

/// @brief A mapped safetensors file and its tensors (pointing into the map).
struct SafetensorsFile {
  MappedFile map;
  std::vector<SafetensorsTensor> tensors;
  static Result<SafetensorsFile> open(const std::string& path);
};

/// @brief Writes a safetensors file of these tensors (data copied from each tensor's pointer).
Status write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors);

}  // namespace th
