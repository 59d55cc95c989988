// A read-only memory map of a whole file, unmapped when it goes out of scope.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace th {

class MappedFile {
 public:
  /// @brief Maps `path` read-only. An empty file maps to size 0, data nullptr.
  static Result<MappedFile> open(const std::string& path);
  /// @brief `size` bytes of fresh, zeroed, page-aligned private memory (for an image made in
  /// memory, e.g. a decrypted model), named `name`; written through mutable_data().
  static Result<MappedFile> anonymous(size_t size, std::string name);

  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  /// @brief Writable only for anonymous() maps (a file's map is read-only: writing faults).
  uint8_t* mutable_data() { return const_cast<uint8_t*>(data_); }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace th
