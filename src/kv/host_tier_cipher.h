// Encryption of KV blocks at rest in the host tier. A sequence preempted to
// host memory leaves its keys and values there, where a core dump, a swap file
// or another process's read of freed pages could find them. Each block is
// sealed with AES-256-GCM under a key drawn fresh by each process (never
// stored), one seal per block over all its layers' K and V, with the block's
// id as associated data: a swapped-in block is verified before the forward
// pass uses it, and a block cannot stand in for another.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "base/status.h"

namespace th {

class HostTierCipher {
 public:
  /// @brief A fresh random key, and records for `n_blocks` host blocks.
  static Result<HostTierCipher> create(int64_t n_blocks);
  HostTierCipher(HostTierCipher&&) noexcept;
  HostTierCipher& operator=(HostTierCipher&&) noexcept;
  ~HostTierCipher();

  /// A block is a list of byte ranges (each layer's K, then V), sealed or opened in order.
  using Pieces = std::vector<std::pair<uint8_t*, size_t>>;

  /// @brief Encrypts host block `block`'s pieces in place and records its nonce and tag.
  Status seal(int32_t block, const Pieces& pieces);
  /// @brief Decrypts host block `block` piece by piece into `sink(i, plaintext, n)` (the host
  /// copy stays sealed) and verifies its tag at the end: an error means the block was changed
  /// and nothing the sink received may be used.
  Status open(int32_t block, const std::vector<std::pair<const uint8_t*, size_t>>& pieces,
              const std::function<void(size_t piece, const uint8_t* plain, size_t n)>& sink) const;

 private:
  struct Record {
    uint64_t counter = 0;  // the nonce: unique per seal (a process-wide counter)
    std::array<uint8_t, 16> tag{};
  };
  HostTierCipher() = default;
  std::array<uint8_t, 32> key_{};
  uint64_t next_counter_ = 1;
  std::vector<Record> records_;
};

}  // namespace th
