#include "cluster/prefix_hash.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <random>
#include <set>
#include <string>

namespace th::cluster {
namespace {

std::string random_text(std::mt19937_64& rng, size_t n) {
  std::string s(n, ' ');
  for (char& c : s) c = static_cast<char>('a' + rng() % 26);
  return s;
}

TEST(PrefixHash, OnlyFullBlocks) {
  EXPECT_TRUE(prefix_block_hashes("").empty());
  EXPECT_TRUE(prefix_block_hashes(std::string(63, 'x')).empty());
  EXPECT_EQ(prefix_block_hashes(std::string(64, 'x')).size(), 1u);
  EXPECT_EQ(prefix_block_hashes(std::string(127, 'x')).size(), 1u);
  EXPECT_EQ(prefix_block_hashes(std::string(128, 'x')).size(), 2u);
  EXPECT_EQ(prefix_block_hashes(std::string(200, 'x')).size(), 3u);
  EXPECT_EQ(prefix_block_hashes(std::string(10, 'x'), 3).size(), 3u);
  EXPECT_TRUE(prefix_block_hashes(std::string(100, 'x'), 0).empty());
}

TEST(PrefixHash, IsTheDocumentedChain) {
  std::mt19937_64 rng(1);
  const std::string p = random_text(rng, 64 * 3 + 10);
  const auto h = prefix_block_hashes(p);
  ASSERT_EQ(h.size(), 3u);
  const uint64_t h0 = XXH3_64bits_withSeed(p.data(), 64, 0);
  const uint64_t h1 = XXH3_64bits_withSeed(p.data() + 64, 64, h0);
  const uint64_t h2 = XXH3_64bits_withSeed(p.data() + 128, 64, h1);
  EXPECT_EQ(h[0], h0);
  EXPECT_EQ(h[1], h1);
  EXPECT_EQ(h[2], h2);
}

TEST(PrefixHash, PartialTailIsIgnored) {
  std::mt19937_64 rng(2);
  const std::string p = random_text(rng, 128);
  EXPECT_EQ(prefix_block_hashes(p), prefix_block_hashes(p + "tail that is not a full block"));
}

TEST(PrefixHash, SharedPrefixSharesElementsUntilTheDivergingBlock) {
  std::mt19937_64 rng(3);
  const std::string common = random_text(rng, 150);  // blocks 0 and 1 whole, block 2 partly
  const std::string tail = random_text(rng, 300);
  const auto a = prefix_block_hashes(common + "X" + tail);
  const auto b = prefix_block_hashes(common + "Y" + tail);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), 7u);
  EXPECT_EQ(a[0], b[0]);
  EXPECT_EQ(a[1], b[1]);
  // Byte 150 is in block 2; from there on every element differs, even where
  // the blocks' own bytes are the same again (the chain carries the difference).
  for (size_t i = 2; i < a.size(); ++i) EXPECT_NE(a[i], b[i]) << i;
}

TEST(PrefixHash, ADifferenceInABlocksLastByteChangesThatBlock) {
  std::mt19937_64 rng(4);
  std::string a = random_text(rng, 256), b = a;
  b[127] ^= 1;
  const auto ha = prefix_block_hashes(a), hb = prefix_block_hashes(b);
  EXPECT_EQ(ha[0], hb[0]);
  EXPECT_NE(ha[1], hb[1]);
  EXPECT_NE(ha[3], hb[3]);
}

TEST(PrefixHash, RepeatedBlocksHashDifferentlyByPosition) {
  const auto h = prefix_block_hashes(std::string(64 * 10, 'a'));
  ASSERT_EQ(h.size(), 10u);
  EXPECT_EQ(std::set<uint64_t>(h.begin(), h.end()).size(), 10u);
}

TEST(PrefixHash, MaxBlocksKeepsTheLeadingOnes) {
  std::mt19937_64 rng(5);
  const std::string p = random_text(rng, 64 * 100);
  const auto all = prefix_block_hashes(p, 64, 1000);
  ASSERT_EQ(all.size(), 100u);
  EXPECT_EQ(prefix_block_hashes(p).size(), 64u);  // the default cap
  const auto three = prefix_block_hashes(p, 64, 3);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_TRUE(std::equal(three.begin(), three.end(), all.begin()));
  EXPECT_TRUE(prefix_block_hashes(p, 64, 0).empty());
}

TEST(PrefixHash, BlockSizeChangesTheHashes) {
  std::mt19937_64 rng(6);
  const std::string p = random_text(rng, 256);
  const auto h32 = prefix_block_hashes(p, 32);
  const auto h64 = prefix_block_hashes(p, 64);
  ASSERT_EQ(h32.size(), 8u);
  ASSERT_EQ(h64.size(), 4u);
  EXPECT_NE(h32[1], h64[0]);  // the same 64 bytes, hashed as one block or two
}

TEST(PrefixHash, DistinctPromptsDoNotCollide) {
  std::mt19937_64 rng(7);
  std::set<uint64_t> first;
  for (int i = 0; i < 5000; ++i) first.insert(prefix_block_hashes(random_text(rng, 64))[0]);
  EXPECT_EQ(first.size(), 5000u);
}

}  // namespace
}  // namespace th::cluster
