#include "audit/merkle.h"

#include <openssl/evp.h>

#include <bit>
#include <cstdlib>
#include <memory>

namespace th::audit {
namespace {

struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

// One context per thread, reset per digest: EVP_Digest would fetch and
// allocate on every call, and a verifier hashes millions of nodes.
Hash sha256_parts(std::initializer_list<std::span<const uint8_t>> parts) {
  thread_local std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  Hash out{};
  unsigned int len = 0;
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) std::abort();
  for (std::span<const uint8_t> p : parts)
    if (EVP_DigestUpdate(ctx.get(), p.data(), p.size()) != 1) std::abort();
  if (EVP_DigestFinal_ex(ctx.get(), out.data(), &len) != 1 || len != out.size()) std::abort();
  return out;
}

uint64_t largest_power_of_two_below(uint64_t n) {  // n >= 2
  return std::bit_floor(n - 1);
}

}  // namespace

Hash sha256(std::span<const uint8_t> data) { return sha256_parts({data}); }
Hash sha256(std::string_view data) {
  return sha256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
}

std::string to_hex(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

Hash merkle_leaf_hash(std::span<const uint8_t> data) {
  static constexpr uint8_t kLeaf = 0x00;
  return sha256_parts({std::span(&kLeaf, 1), data});
}

Hash merkle_node_hash(const Hash& left, const Hash& right) {
  static constexpr uint8_t kNode = 0x01;
  return sha256_parts({std::span(&kNode, 1), left, right});
}

Hash merkle_empty_root() { return sha256(std::span<const uint8_t>()); }

void MerkleFrontier::append(const Hash& leaf_hash) {
  // Merge equal-sized subtrees at the right edge, as binary addition carries.
  Hash h = leaf_hash;
  for (uint64_t s = size_; s & 1; s >>= 1) {
    h = merkle_node_hash(subtrees_.back(), h);
    subtrees_.pop_back();
  }
  subtrees_.push_back(h);
  ++size_;
}

Hash MerkleFrontier::root() const {
  if (subtrees_.empty()) return merkle_empty_root();
  // MTH splits at the largest power of two, so the root folds from the right.
  Hash h = subtrees_.back();
  for (size_t i = subtrees_.size() - 1; i-- > 0;) h = merkle_node_hash(subtrees_[i], h);
  return h;
}

void MerkleTree::append(const Hash& leaf_hash) {
  if (levels_.empty()) levels_.emplace_back();
  levels_[0].push_back(leaf_hash);
  for (size_t h = 0; levels_[h].size() % 2 == 0; ++h) {
    if (h + 1 == levels_.size()) levels_.emplace_back();
    const std::vector<Hash>& lv = levels_[h];
    levels_[h + 1].push_back(merkle_node_hash(lv[lv.size() - 2], lv[lv.size() - 1]));
  }
}

Hash MerkleTree::range_hash(uint64_t lo, uint64_t hi) const {
  const uint64_t n = hi - lo;
  if (n == 0) return merkle_empty_root();
  // Every range the RFC's recursions visit starts at a multiple of the
  // largest power of two that fits in it, so perfect ranges are stored nodes.
  if (std::has_single_bit(n) && lo % n == 0) {
    const int h = std::countr_zero(n);
    return levels_[h][lo >> h];
  }
  const uint64_t k = largest_power_of_two_below(n);
  return merkle_node_hash(range_hash(lo, lo + k), range_hash(lo + k, hi));
}

Hash MerkleTree::root(uint64_t n) const { return range_hash(0, n); }

MerkleFrontier MerkleTree::frontier() const {
  MerkleFrontier f;
  // Rebuilding by appending costs n hashes; cheap next to having read n entries.
  for (uint64_t i = 0; i < size(); ++i) f.append(leaf(i));
  return f;
}

void MerkleTree::path(uint64_t m, uint64_t lo, uint64_t hi, std::vector<Hash>& out) const {
  const uint64_t n = hi - lo;
  if (n <= 1) return;
  const uint64_t k = largest_power_of_two_below(n);
  if (m < k) {
    path(m, lo, lo + k, out);
    out.push_back(range_hash(lo + k, hi));
  } else {
    path(m - k, lo + k, hi, out);
    out.push_back(range_hash(lo, lo + k));
  }
}

Result<std::vector<Hash>> MerkleTree::inclusion_proof(uint64_t m, uint64_t n) const {
  if (n > size() || m >= n) return Status::errorf("no inclusion proof for leaf ", m, " in a tree of ", n);
  std::vector<Hash> out;
  path(m, 0, n, out);
  return out;
}

void MerkleTree::subproof(uint64_t m, uint64_t lo, uint64_t hi, bool b, std::vector<Hash>& out) const {
  const uint64_t n = hi - lo;
  if (m == n) {
    if (!b) out.push_back(range_hash(lo, hi));
    return;
  }
  const uint64_t k = largest_power_of_two_below(n);
  if (m <= k) {
    subproof(m, lo, lo + k, b, out);
    out.push_back(range_hash(lo + k, hi));
  } else {
    subproof(m - k, lo + k, hi, false, out);
    out.push_back(range_hash(lo, lo + k));
  }
}

Result<std::vector<Hash>> MerkleTree::consistency_proof(uint64_t m, uint64_t n) const {
  if (n > size() || m > n) return Status::errorf("no consistency proof from ", m, " to ", n, " leaves");
  std::vector<Hash> out;
  if (m == 0 || m == n) return out;  // RFC 9162: the empty proof
  subproof(m, 0, n, true, out);
  return out;
}

bool verify_inclusion(uint64_t index, uint64_t size, const Hash& leaf_hash, std::span<const Hash> proof,
                      const Hash& root) {
  if (index >= size) return false;
  uint64_t fn = index, sn = size - 1;
  Hash r = leaf_hash;
  for (const Hash& p : proof) {
    if (sn == 0) return false;
    if ((fn & 1) || fn == sn) {
      r = merkle_node_hash(p, r);
      if (!(fn & 1))
        while (fn != 0 && !(fn & 1)) {
          fn >>= 1;
          sn >>= 1;
        }
    } else {
      r = merkle_node_hash(r, p);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return sn == 0 && r == root;
}

bool verify_consistency(uint64_t m, uint64_t n, const Hash& root_m, const Hash& root_n,
                        std::span<const Hash> proof) {
  if (m > n) return false;
  if (m == n) return proof.empty() && root_m == root_n;
  if (m == 0) return proof.empty();  // the empty tree is a prefix of every tree
  if (proof.empty()) return false;
  // RFC 9162 2.1.4.2, steps 1-7.
  std::vector<Hash> path(proof.begin(), proof.end());
  if (std::has_single_bit(m)) path.insert(path.begin(), root_m);
  uint64_t fn = m - 1, sn = n - 1;
  while (fn & 1) {
    fn >>= 1;
    sn >>= 1;
  }
  Hash fr = path[0], sr = path[0];
  for (size_t i = 1; i < path.size(); ++i) {
    const Hash& c = path[i];
    if (sn == 0) return false;
    if ((fn & 1) || fn == sn) {
      fr = merkle_node_hash(c, fr);
      sr = merkle_node_hash(c, sr);
      if (!(fn & 1))
        while (fn != 0 && !(fn & 1)) {
          fn >>= 1;
          sn >>= 1;
        }
    } else {
      sr = merkle_node_hash(sr, c);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return fr == root_m && sr == root_n && sn == 0;
}

}  // namespace th::audit
