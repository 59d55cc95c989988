// Merkle trees as RFC 6962 / RFC 9162 define them (Certificate Transparency):
// leaf hash SHA-256(0x00 || data), interior node SHA-256(0x01 || left || right),
// and for n leaves that are not a power of two, MTH(D[n]) =
// node(MTH(D[0:k]), MTH(D[k:n])) with k the largest power of two below n.
// Inclusion and consistency proofs follow RFC 9162 section 2.1.3 / 2.1.4
// (generation as the RFC's PATH / PROOF recursions, verification as its
// iterative algorithms).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace th::audit {

using Hash = std::array<uint8_t, 32>;

/// @brief SHA-256 of `data` (OpenSSL EVP).
Hash sha256(std::span<const uint8_t> data);
Hash sha256(std::string_view data);
/// @brief Lower-case hex of `bytes`.
std::string to_hex(std::span<const uint8_t> bytes);

/// @brief RFC 6962 leaf hash: SHA-256(0x00 || data).
Hash merkle_leaf_hash(std::span<const uint8_t> data);
/// @brief RFC 6962 interior node: SHA-256(0x01 || left || right).
Hash merkle_node_hash(const Hash& left, const Hash& right);
/// @brief MTH of the empty tree: SHA-256 of nothing.
Hash merkle_empty_root();

/// @brief The right edge of a tree: the roots of its perfect subtrees, largest
/// first (one per set bit of the size). Enough to append and to give the root;
/// what a writer keeps (log2(n) hashes, not n).
class MerkleFrontier {
 public:
  void append(const Hash& leaf_hash);
  uint64_t size() const { return size_; }
  Hash root() const;

 private:
  uint64_t size_ = 0;
  std::vector<Hash> subtrees_;  // subtrees_[i] covers 2^(bit) leaves, largest first
};

/// @brief Every leaf and every complete interior node: roots of any prefix and
/// proofs in O(log^2 n) hashes. What a verifier keeps (64 bytes per leaf).
class MerkleTree {
 public:
  void append(const Hash& leaf_hash);
  uint64_t size() const { return levels_.empty() ? 0 : levels_[0].size(); }
  const Hash& leaf(uint64_t i) const { return levels_[0][i]; }

  /// @brief MTH of the first n leaves (n <= size()).
  Hash root(uint64_t n) const;
  Hash root() const { return root(size()); }
  /// @brief RFC 9162 PATH(m, D[n]): the inclusion proof of leaf m in the tree of the first n leaves.
  Result<std::vector<Hash>> inclusion_proof(uint64_t m, uint64_t n) const;
  /// @brief RFC 9162 PROOF(m, D[n]): the consistency proof from the first m to the first n leaves.
  Result<std::vector<Hash>> consistency_proof(uint64_t m, uint64_t n) const;
  /// @brief The frontier of the whole tree (what a writer continues from).
  MerkleFrontier frontier() const;

 private:
  Hash range_hash(uint64_t lo, uint64_t hi) const;  // MTH(D[lo:hi])
  void path(uint64_t m, uint64_t lo, uint64_t hi, std::vector<Hash>& out) const;
  void subproof(uint64_t m, uint64_t lo, uint64_t hi, bool b, std::vector<Hash>& out) const;

  std::vector<std::vector<Hash>> levels_;  // levels_[h][i] = MTH(D[i*2^h : (i+1)*2^h])
};

/// @brief RFC 9162 2.1.3.2: does `proof` show leaf `index` (hash `leaf_hash`) in
/// the tree of `size` leaves with root `root`?
bool verify_inclusion(uint64_t index, uint64_t size, const Hash& leaf_hash, std::span<const Hash> proof,
                      const Hash& root);
/// @brief RFC 9162 2.1.4.2: does `proof` show the tree of size `m` (root
/// `root_m`) is a prefix of the tree of size `n` (root `root_n`)?
bool verify_consistency(uint64_t m, uint64_t n, const Hash& root_m, const Hash& root_n,
                        std::span<const Hash> proof);

}  // namespace th::audit
