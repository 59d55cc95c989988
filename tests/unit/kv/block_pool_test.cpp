#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include "kv/prefix_cache.h"

namespace th {
namespace {

TEST(BlockPool, HandsOutInOrderAndReusesTheLastFreed) {
  BlockPool p(4);
  EXPECT_EQ(p.n_free(), 4);
  EXPECT_EQ(p.take(), 0);
  EXPECT_EQ(p.take(), 1);
  EXPECT_EQ(p.take(), 2);
  EXPECT_EQ(p.refcount(1), 1);
  p.add_ref(1);
  EXPECT_EQ(p.release(1), 1);
  EXPECT_EQ(p.n_free(), 1);
  EXPECT_EQ(p.release(1), 0);
  EXPECT_EQ(p.n_free(), 2);
  EXPECT_EQ(p.take(), 1);  // freed last, reused first
  EXPECT_EQ(p.take(), 3);
  EXPECT_EQ(p.take(), -1);
}

TEST(PrefixCache, FindsByHashAndEvictsLeastRecentlyUnused) {
  PrefixCache c(8);
  const BlockHash root = prefix_root("tenant", "");
  const int32_t toks[4] = {1, 2, 3, 4};
  const BlockHash h0 = hash_block(root, toks), h1 = hash_block(h0, toks), h2 = hash_block(h1, toks);
  EXPECT_NE(h0, h1);
  c.insert(h0, 5);
  c.insert(h1, 6);
  c.insert(h2, 7);
  EXPECT_EQ(c.find(h1), 6);
  EXPECT_EQ(c.find(hash_block(prefix_root("other", ""), toks)), -1);
  EXPECT_EQ(c.evict_oldest(), -1);  // everything is in use
  c.mark_unused(7);
  c.mark_unused(5);
  c.mark_unused(6);
  c.mark_used(5);
  EXPECT_EQ(c.n_unused(), 2);
  EXPECT_EQ(c.unused_blocks(), (std::vector<int32_t>{7, 6}));
  EXPECT_EQ(c.evict_oldest(), 7);
  EXPECT_FALSE(c.contains(7));
  EXPECT_EQ(c.find(h2), -1);
  EXPECT_EQ(c.evict_oldest(), 6);
  EXPECT_EQ(c.evict_oldest(), -1);
  EXPECT_EQ(c.size(), 1);
}

TEST(BlockHash, ChainsOnTheParentAndSaltsByTenant) {
  const int32_t a[2] = {7, 8}, b[2] = {7, 9};
  const BlockHash r = prefix_root("t", "");
  EXPECT_EQ(hash_block(r, a), hash_block(r, a));
  EXPECT_NE(hash_block(r, a), hash_block(r, b));
  EXPECT_NE(hash_block(r, a), hash_block(prefix_root("t", "s"), a));
  EXPECT_NE(prefix_root("ab", "c"), prefix_root("a", "bc"));
  std::vector<BlockHash> hs;
  const std::vector<int32_t> toks = {1, 2, 3, 4, 5};
  extend_block_hashes(hs, r, toks, 2);
  ASSERT_EQ(hs.size(), 2u);
  EXPECT_EQ(hs[1], hash_block(hash_block(r, std::span(toks).first(2)), std::span(toks).subspan(2, 2)));
}

}  // namespace
}  // namespace th
