// GGUF (v2 and v3) reader and writer.
//
// The reader maps the file and validates everything before it hands out a
// pointer: every count, string length, dimension and tensor extent is checked
// against the bytes that are really there, so a bad file is a one-line error,
// never a crash, a huge allocation or a hang.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"
#include "tensor/dtype.h"

namespace th {

enum class GgufType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

std::string_view gguf_type_name(GgufType t);

struct GgufArray;

/// @brief One metadata value. Integers of every width are held as int64_t
/// (UINT64 bit-for-bit), floats as double.
struct GgufValue {
  GgufType type = GgufType::UINT8;
  std::variant<int64_t, double, bool, std::string, std::shared_ptr<GgufArray>> v;
};

/// @brief An array value; exactly one of the vectors is filled, by elem_type.
struct GgufArray {
  GgufType elem_type = GgufType::UINT8;
  std::vector<int64_t> ints;          // integer types (UINT64 bit-for-bit)
  std::vector<double> floats;         // FLOAT32, FLOAT64
  std::vector<uint8_t> bools;         // BOOL
  std::vector<std::string> strings;   // STRING
  std::vector<GgufArray> arrays;      // ARRAY (nested)
  size_t size() const;
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> dims;  // dims[0] is the row length (contiguous), as in ggml's ne[]
  DType type = DType::F32;
  uint64_t offset = 0;        // from the start of the data section
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  int64_t n_elements() const;
  int64_t n_rows() const { return dims.empty() ? 0 : n_elements() / dims[0]; }
};

class GgufFile {
 public:
  /// @brief Maps and validates `path`.
  static Result<GgufFile> open(const std::string& path);
  /// @brief Parses an in-memory image (not copied; must outlive the result). For tests and fuzzing.
  static Result<GgufFile> parse(const uint8_t* data, size_t size, std::string name = "<memory>");
  /// @brief Parses an image it takes over (e.g. a decrypted model in anonymous memory).
  static Result<GgufFile> adopt(MappedFile image);
  /// @brief A file made of parts (a Hugging Face folder, format/hf_folder.h): metadata and
  /// tensors whose data points into `maps`, which the result keeps alive. Tensor names must
  /// be unique.
  static Result<GgufFile> assemble(std::string name, std::vector<std::pair<std::string, GgufValue>> kv,
                                   std::vector<GgufTensor> tensors, std::vector<MappedFile> maps);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& name() const { return name_; }

  // Metadata, in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  /// Typed getters: an error names the key when it is missing or of the wrong type
  /// or out of range. Any integer type is accepted where the value fits.
  Result<std::string> get_string(std::string_view key) const;
  Result<uint64_t> get_uint(std::string_view key) const;
  Result<int64_t> get_int(std::string_view key) const;
  Result<double> get_float(std::string_view key) const;  // FLOAT32/FLOAT64 or any integer
  Result<bool> get_bool(std::string_view key) const;
  Result<const GgufArray*> get_array(std::string_view key) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* tensor(std::string_view name) const;

 private:
  MappedFile file_;
  std::vector<MappedFile> parts_;  // assemble()'s maps
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

/// @brief Builds a GGUF v3 file in memory and writes it out.
class GgufWriter {
 public:
  /// A power of two. A general.alignment added as metadata (copied from another
  /// file, say) wins over this: it is what readers lay the file out by.
  void set_alignment(uint32_t a) { alignment_ = a; }
  void add(std::string key, GgufValue value);
  void add_string(std::string key, std::string v);
  void add_u32(std::string key, uint32_t v);
  void add_i32(std::string key, int32_t v);
  void add_f32(std::string key, float v);
  void add_bool(std::string key, bool v);
  void add_array(std::string key, GgufArray a);
  /// Copies `nbytes` of tensor data; nbytes must equal the type's row size times rows.
  void add_tensor(std::string name, std::vector<int64_t> dims, DType type, const void* data,
                  size_t nbytes);
  /// Adds a tensor whose data will be produced by `fill(dst)` at write time
  /// (lets mkmodel stream a 7B model without holding it in memory).
  void add_tensor_lazy(std::string name, std::vector<int64_t> dims, DType type,
                       std::function<void(uint8_t* dst, size_t nbytes)> fill);

  /// @brief The whole file image (small files: tests, fuzz seeds).
  std::vector<uint8_t> to_bytes() const;
  Status write(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    std::vector<int64_t> dims;
    DType type;
    size_t nbytes;
    std::vector<uint8_t> data;
    std::function<void(uint8_t*, size_t)> fill;
  };
  std::vector<uint8_t> header_bytes(std::vector<uint64_t>* offsets) const;
  uint64_t layout_alignment() const;
  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace th
