// The Merkle tree against the RFC's own definitions: a plain recursive MTH,
// PATH and PROOF written straight from RFC 6962 section 2.1 over the leaf
// data, compared with MerkleTree / MerkleFrontier and the verifiers for every
// size 1..64 and every index pair; plus the Certificate Transparency test
// vectors (the eight well-known leaves, their roots and proofs).
#include "audit/merkle.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace th::audit {
namespace {

using Bytes = std::vector<uint8_t>;

Hash from_hex(const std::string& h) {
  Hash out{};
  for (size_t i = 0; i < 32; ++i) out[i] = static_cast<uint8_t>(std::stoi(h.substr(2 * i, 2), nullptr, 16));
  return out;
}

Bytes bytes_from_hex(const std::string& h) {
  Bytes out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

// --- The reference: RFC 6962 2.1, word for word, over the leaf data. ---
Hash ref_sha(const Bytes& b) { return sha256(std::span<const uint8_t>(b)); }

uint64_t ref_k(uint64_t n) {  // the largest power of two smaller than n
  uint64_t k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

Hash ref_mth(const std::vector<Bytes>& d, size_t lo, size_t hi) {
  const size_t n = hi - lo;
  if (n == 0) return ref_sha({});
  if (n == 1) {
    Bytes b{0x00};
    b.insert(b.end(), d[lo].begin(), d[lo].end());
    return ref_sha(b);
  }
  const size_t k = ref_k(n);
  const Hash l = ref_mth(d, lo, lo + k), r = ref_mth(d, lo + k, hi);
  Bytes b{0x01};
  b.insert(b.end(), l.begin(), l.end());
  b.insert(b.end(), r.begin(), r.end());
  return ref_sha(b);
}

std::vector<Hash> ref_path(size_t m, const std::vector<Bytes>& d, size_t lo, size_t hi) {
  const size_t n = hi - lo;
  if (n == 1) return {};
  const size_t k = ref_k(n);
  std::vector<Hash> out;
  if (m < k) {
    out = ref_path(m, d, lo, lo + k);
    out.push_back(ref_mth(d, lo + k, hi));
  } else {
    out = ref_path(m - k, d, lo + k, hi);
    out.push_back(ref_mth(d, lo, lo + k));
  }
  return out;
}

std::vector<Hash> ref_subproof(size_t m, const std::vector<Bytes>& d, size_t lo, size_t hi, bool b) {
  const size_t n = hi - lo;
  if (m == n) return b ? std::vector<Hash>{} : std::vector<Hash>{ref_mth(d, lo, hi)};
  const size_t k = ref_k(n);
  std::vector<Hash> out;
  if (m <= k) {
    out = ref_subproof(m, d, lo, lo + k, b);
    out.push_back(ref_mth(d, lo + k, hi));
  } else {
    out = ref_subproof(m - k, d, lo + k, hi, false);
    out.push_back(ref_mth(d, lo, lo + k));
  }
  return out;
}

std::vector<Hash> ref_proof(size_t m, const std::vector<Bytes>& d, size_t n) {
  if (m == 0 || m == n) return {};
  return ref_subproof(m, d, 0, n, true);
}
// --- End of the reference. ---

std::vector<Bytes> make_leaves(size_t n) {
  std::vector<Bytes> d;
  for (size_t i = 0; i < n; ++i) d.push_back(Bytes(i % 5, static_cast<uint8_t>(i * 37 + 1)));
  return d;
}

MerkleTree tree_of(const std::vector<Bytes>& d) {
  MerkleTree t;
  for (const Bytes& b : d) t.append(merkle_leaf_hash(b));
  return t;
}

TEST(MerkleTest, RootsAndProofsMatchTheRfcDefinitionsForEverySizeUpTo64) {
  const std::vector<Bytes> d = make_leaves(64);
  const MerkleTree tree = tree_of(d);
  MerkleFrontier frontier;
  EXPECT_EQ(tree.root(0), ref_sha({}));
  for (size_t n = 1; n <= 64; ++n) {
    frontier.append(merkle_leaf_hash(d[n - 1]));
    const Hash root = ref_mth(d, 0, n);
    ASSERT_EQ(tree.root(n), root) << n;
    ASSERT_EQ(frontier.root(), root) << n;
    for (size_t m = 0; m < n; ++m) {
      Result<std::vector<Hash>> path = tree.inclusion_proof(m, n);
      ASSERT_TRUE(path.ok());
      ASSERT_EQ(*path, ref_path(m, d, 0, n)) << m << " in " << n;
      EXPECT_TRUE(verify_inclusion(m, n, merkle_leaf_hash(d[m]), *path, root)) << m << " in " << n;
      // The same proof must not prove another leaf, position or size.
      EXPECT_FALSE(verify_inclusion(m, n, merkle_leaf_hash(Bytes{9, 9, 9}), *path, root));
      if (n > 1) {
        EXPECT_FALSE(verify_inclusion((m + 1) % n, n, merkle_leaf_hash(d[m]), *path, root));
      }
      // (The size alone is not bound: a proof for (m, n) can pass as (m, n + 1)
      // against the same root. Roots are signed with their size, so that is harmless.)
      Hash other = root;
      other[31] ^= 1;
      EXPECT_FALSE(verify_inclusion(m, n, merkle_leaf_hash(d[m]), *path, other));
    }
    for (size_t m = 0; m <= n; ++m) {
      Result<std::vector<Hash>> proof = tree.consistency_proof(m, n);
      ASSERT_TRUE(proof.ok());
      ASSERT_EQ(*proof, ref_proof(m, d, n)) << m << " to " << n;
      const Hash root_m = ref_mth(d, 0, m);
      EXPECT_TRUE(verify_consistency(m, n, root_m, root, *proof)) << m << " to " << n;
      if (m > 0 && m < n) {
        Hash bad = root_m;
        bad[0] ^= 1;
        EXPECT_FALSE(verify_consistency(m, n, bad, root, *proof)) << m << " to " << n;
        EXPECT_FALSE(verify_consistency(m, n, root_m, bad, *proof)) << m << " to " << n;
        std::vector<Hash> cut(proof->begin(), proof->end() - 1);
        EXPECT_FALSE(verify_consistency(m, n, root_m, root, cut)) << m << " to " << n;
        std::vector<Hash> flipped = *proof;
        flipped.back()[5] ^= 0x80;
        EXPECT_FALSE(verify_consistency(m, n, root_m, root, flipped)) << m << " to " << n;
      }
    }
  }
}

TEST(MerkleTest, OutOfRangeProofsAreErrors) {
  const MerkleTree tree = tree_of(make_leaves(5));
  EXPECT_FALSE(tree.inclusion_proof(5, 5).ok());
  EXPECT_FALSE(tree.inclusion_proof(0, 6).ok());
  EXPECT_FALSE(tree.consistency_proof(3, 6).ok());
  EXPECT_FALSE(tree.consistency_proof(4, 3).ok());
  EXPECT_FALSE(verify_inclusion(5, 5, Hash{}, {}, Hash{}));
  EXPECT_FALSE(verify_consistency(4, 3, Hash{}, Hash{}, {}));
}

// certificate-transparency's merkle_tree_test.cc / transparency-dev's testonly vectors.
const std::vector<std::string> kCtLeaves = {
    "", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"};
const std::vector<std::string> kCtRoots = {
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"};

TEST(MerkleTest, CertificateTransparencyTestVectors) {
  MerkleTree tree;
  std::vector<Bytes> d;
  for (const std::string& h : kCtLeaves) {
    d.push_back(bytes_from_hex(h));
    tree.append(merkle_leaf_hash(d.back()));
  }
  EXPECT_EQ(to_hex(tree.root(0)), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  for (size_t n = 1; n <= 8; ++n) {
    EXPECT_EQ(to_hex(tree.root(n)), kCtRoots[n - 1]) << n;
    EXPECT_EQ(to_hex(ref_mth(d, 0, n)), kCtRoots[n - 1]) << n;
  }
  struct Vector {
    uint64_t a, n;
    std::vector<std::string> proof;
  };
  const std::vector<Vector> inclusion = {
      {0, 8,
       {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
      {5, 8,
       {"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
      {2, 3, {"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"}},
      {1, 5,
       {"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
  };
  for (const Vector& v : inclusion) {
    std::vector<Hash> want;
    for (const std::string& h : v.proof) want.push_back(from_hex(h));
    EXPECT_EQ(*tree.inclusion_proof(v.a, v.n), want) << v.a << " in " << v.n;
    EXPECT_TRUE(verify_inclusion(v.a, v.n, tree.leaf(v.a), want, from_hex(kCtRoots[v.n - 1])));
  }
  const std::vector<Vector> consistency = {
      {1, 8,
       {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
      {2, 8,
       {"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
      {6, 8,
       {"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
      {2, 5,
       {"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
  };
  for (const Vector& v : consistency) {
    std::vector<Hash> want;
    for (const std::string& h : v.proof) want.push_back(from_hex(h));
    EXPECT_EQ(*tree.consistency_proof(v.a, v.n), want) << v.a << " to " << v.n;
    EXPECT_TRUE(verify_consistency(v.a, v.n, from_hex(kCtRoots[v.a - 1]), from_hex(kCtRoots[v.n - 1]), want));
  }
}

TEST(MerkleTest, Sha256AndHex) {
  EXPECT_EQ(to_hex(sha256(std::string_view("abc"))),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace th::audit
