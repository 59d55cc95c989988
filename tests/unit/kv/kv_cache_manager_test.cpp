#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

namespace th {
namespace {

constexpr int64_t kBs = 4;

struct Fixture {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<KvCacheManager> kv;
  explicit Fixture(int64_t primary, int64_t host = 0, bool encrypt = true, int64_t window = 0) {
    KvCacheConfig c;
    c.window = window;
    c.encrypt_host_tier = encrypt;
    c.block_size = kBs;
    c.primary_blocks = primary;
    c.host_blocks = host;
    auto m = KvCacheManager::create(*backend, 2, 8, c);
    EXPECT_TRUE(m.ok()) << m.message();
    kv = std::move(m).value();
  }
};

struct Seq {
  SeqId id;
  std::vector<int32_t> tokens;
  std::vector<BlockHash> hashes;
  Seq(SeqId i, std::vector<int32_t> t, std::string_view tenant = "") : id(i), tokens(std::move(t)) {
    extend_block_hashes(hashes, prefix_root(tenant, ""), tokens, kBs);
  }
  KvStepEntry entry(int64_t target) const {
    return {id, target, static_cast<int64_t>(tokens.size()), hashes};
  }
};

std::vector<int32_t> iota(int n, int from = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

void run(KvCacheManager& kv, std::vector<KvStepEntry> e) {
  ASSERT_TRUE(kv.prepare(e).ok());
  kv.commit();
  Status s = kv.check_invariants();
  ASSERT_TRUE(s.ok()) << s.message();
}

TEST(KvCacheManager, RepeatedPrefixSharesFullBlocksButNotTheLast) {
  Fixture f(32);
  KvCacheManager& kv = *f.kv;
  Seq a(1, iota(40)), b(2, iota(40)), c(3, iota(41));
  kv.add(a.id);
  run(kv, {a.entry(24)});  // chunked: 6 blocks, then the rest
  run(kv, {a.entry(40)});
  EXPECT_EQ(kv.stats().cached_blocks, 10);

  // The whole of b is cached, but its last token must be computed again: 9 blocks shared.
  const PrefixMatch m = kv.match_prefix(b.hashes, 40);
  EXPECT_EQ(m.blocks, 9);
  EXPECT_EQ(m.cost_blocks, 9);  // each is held by one sequence only
  kv.add(b.id);
  kv.add(c.id);
  ASSERT_TRUE(kv.prepare(std::vector{b.entry(40), c.entry(41)}).ok());
  EXPECT_EQ(kv.computed(b.id), 36);
  EXPECT_EQ(kv.computed(c.id), 40);  // c has 41 tokens: all 10 blocks
  kv.commit();
  ASSERT_TRUE(kv.check_invariants().ok()) << kv.check_invariants().message();
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(kv.table(a.id)[i], kv.table(b.id)[i]);
    EXPECT_EQ(kv.primary().pool().refcount(kv.table(a.id)[i]), 4);  // a, b, c and the cache
  }
  EXPECT_NE(kv.table(a.id)[9], kv.table(b.id)[9]);
  EXPECT_EQ(kv.table(a.id)[9], kv.table(c.id)[9]);
  EXPECT_EQ(kv.stats().prefix_hit_tokens, 36 + 40);
  EXPECT_EQ(kv.stats().prefix_query_tokens, 40 + 40 + 41);
}

TEST(KvCacheManager, TenantsNeverShare) {
  Fixture f(32);
  KvCacheManager& kv = *f.kv;
  Seq a(1, iota(20), "alice"), b(2, iota(20), "bob");
  kv.add(a.id);
  run(kv, {a.entry(20)});
  EXPECT_EQ(kv.match_prefix(b.hashes, 20).blocks, 0);
  EXPECT_EQ(kv.match_prefix(Seq(3, iota(20), "alice").hashes, 20).blocks, 4);
}

TEST(KvCacheManager, UnusedCachedBlocksAreEvictedOnlyWhenNeededTailFirst) {
  Fixture f(8);
  KvCacheManager& kv = *f.kv;
  Seq a(1, iota(16)), b(2, iota(12, 100));
  kv.add(a.id);
  run(kv, {a.entry(16)});
  kv.remove(a.id);
  EXPECT_EQ(kv.stats().cached_unused, 4);
  EXPECT_EQ(kv.available_blocks(), 8);
  kv.add(b.id);
  run(kv, {b.entry(8)});  // two blocks: the free ones first, nothing evicted
  EXPECT_EQ(kv.stats().cached_blocks, 6);
  run(kv, {b.entry(12)});  // three more would need... one block: still free
  kv.add(3);
  Seq c(3, iota(8, 200));
  run(kv, {c.entry(8)});  // 1 free + 1 evicted: a's last block goes first
  EXPECT_EQ(kv.match_prefix(Seq(4, iota(16)).hashes, 16).blocks, 3);
  Status s = kv.prepare(std::vector{Seq(5, iota(40, 300)).entry(40)});
  EXPECT_FALSE(s.ok());  // unknown sequence
  kv.add(5);
  Seq d(5, iota(40, 300));
  s = kv.prepare(std::vector{d.entry(40)});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("needs 10 blocks"), std::string::npos) << s.message();
  ASSERT_TRUE(kv.check_invariants().ok());
  EXPECT_EQ(kv.match_prefix(Seq(4, iota(16)).hashes, 16).blocks, 3);  // the failed prepare evicted nothing
}

TEST(KvCacheManager, RollbackRestoresEverything) {
  Fixture f(16, 8);
  KvCacheManager& kv = *f.kv;
  Seq a(1, iota(20)), b(2, iota(20)), c(3, iota(10, 50));
  kv.add(a.id);
  kv.add(c.id);
  run(kv, {a.entry(20), c.entry(10)});
  ASSERT_TRUE(kv.swap_out(c.id).ok());
  const KvCacheStats before = kv.stats();
  kv.add(b.id);
  ASSERT_TRUE(kv.prepare(std::vector{b.entry(20), c.entry(11), a.entry(21)}).ok());
  EXPECT_EQ(kv.tier(c.id), KvTier::Primary);
  kv.rollback();
  ASSERT_TRUE(kv.check_invariants().ok()) << kv.check_invariants().message();
  EXPECT_EQ(kv.tier(c.id), KvTier::Host);
  EXPECT_EQ(kv.tier(b.id), KvTier::None);
  EXPECT_EQ(kv.computed(a.id), 20);
  EXPECT_EQ(kv.stats().primary_free, before.primary_free);
  EXPECT_EQ(kv.stats().host_free, before.host_free);
}

TEST(KvCacheManager, SwapOutAndInKeepsEveryLayersRows) {
  Fixture f(8, 8);
  KvCacheManager& kv = *f.kv;
  Seq a(1, iota(10));
  kv.add(a.id);
  run(kv, {a.entry(10)});
  const KvCache& p = kv.primary();
  auto fill = [&](int64_t l, int32_t blk, bool v, uint8_t seed) {
    auto* d = static_cast<uint8_t*>(v ? p.v_block(l, blk) : p.k_block(l, blk));
    for (size_t i = 0; i < p.block_bytes(); ++i) d[i] = static_cast<uint8_t>(seed + i * 7);
  };
  const std::vector<int32_t> old(kv.table(a.id).begin(), kv.table(a.id).end());
  for (int64_t l = 0; l < 2; ++l)
    for (size_t j = 0; j < old.size(); ++j) {
      fill(l, old[j], false, static_cast<uint8_t>(l * 10 + j));
      fill(l, old[j], true, static_cast<uint8_t>(l * 10 + j + 100));
    }
  ASSERT_TRUE(kv.swap_out(a.id).ok());
  EXPECT_EQ(kv.tier(a.id), KvTier::Host);
  EXPECT_EQ(kv.stats().host_used, 3);
  EXPECT_EQ(kv.released_by_preempting(a.id), 0);
  // Overwrite the freed primary blocks with another sequence so that swap-in must copy.
  Seq b(2, iota(32, 500));
  kv.add(b.id);
  run(kv, {b.entry(20)});
  kv.remove(b.id);
  run(kv, {a.entry(11)});
  EXPECT_EQ(kv.tier(a.id), KvTier::Primary);
  EXPECT_EQ(kv.stats().host_used, 0);
  for (int64_t l = 0; l < 2; ++l)
    for (size_t j = 0; j < old.size(); ++j) {
      const int32_t nb = kv.table(a.id)[j];
      for (bool v : {false, true}) {
        const auto* d = static_cast<const uint8_t*>(v ? p.v_block(l, nb) : p.k_block(l, nb));
        const uint8_t seed = static_cast<uint8_t>(l * 10 + j + (v ? 100 : 0));
        for (size_t i = 0; i < p.block_bytes(); ++i)
          ASSERT_EQ(d[i], static_cast<uint8_t>(seed + i * 7)) << "layer " << l << " block " << j << " byte " << i;
      }
    }
}

// Host-tier blocks are sealed: the host copy is not the plaintext, a changed byte fails the
// swap-in (which leaves everything as it was), and without encryption the copy is plain.
TEST(KvCacheManager, HostTierBlocksAreEncryptedAndVerified) {
  for (bool encrypt : {true, false}) {
    Fixture f(8, 8, encrypt);
    KvCacheManager& kv = *f.kv;
    Seq a(1, iota(10));
    kv.add(a.id);
    run(kv, {a.entry(10)});
    const KvCache& p = kv.primary();
    const int32_t pb = kv.table(a.id)[0];
    auto* k0 = static_cast<uint8_t*>(p.k_block(0, pb));
    for (size_t i = 0; i < p.block_bytes(); ++i) k0[i] = static_cast<uint8_t>(i * 13 + 1);
    std::vector<uint8_t> plain(k0, k0 + p.block_bytes());
    ASSERT_TRUE(kv.swap_out(a.id).ok());
    const int32_t hb = kv.table(a.id)[0];
    auto* h0 = static_cast<uint8_t*>(kv.host()->k_block(0, hb));
    const bool same = std::memcmp(h0, plain.data(), plain.size()) == 0;
    EXPECT_EQ(same, !encrypt) << "encrypt=" << encrypt;
    if (!encrypt) continue;
    h0[5] ^= 1;  // tamper with the sealed copy
    std::vector<KvStepEntry> e = {a.entry(11)};
    Status s = kv.prepare(e);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("does not verify"), std::string::npos) << s.message();
    EXPECT_EQ(kv.tier(a.id), KvTier::Host);
    ASSERT_TRUE(kv.check_invariants().ok()) << kv.check_invariants().message();
    h0[5] ^= 1;  // restored: it verifies again, and the plaintext comes back
    run(kv, {a.entry(11)});
    const auto* back = static_cast<const uint8_t*>(p.k_block(0, kv.table(a.id)[0]));
    EXPECT_EQ(std::memcmp(back, plain.data(), plain.size()), 0);
  }
}

TEST(KvCacheManager, SwapOutNeedsRoomInTheHostTier) {
  Fixture f(8, 2);
  KvCacheManager& kv = *f.kv;
  Seq a(1, iota(12));
  kv.add(a.id);
  run(kv, {a.entry(12)});
  EXPECT_FALSE(kv.swap_out(a.id).ok());
  EXPECT_EQ(kv.tier(a.id), KvTier::Primary);
  kv.drop(a.id);
  EXPECT_EQ(kv.tier(a.id), KvTier::None);
  EXPECT_EQ(kv.computed(a.id), 0);
  ASSERT_TRUE(kv.check_invariants().ok());
  EXPECT_EQ(kv.match_prefix(a.hashes, 12).blocks, 2);  // dropped, but its blocks stay cached
}

// With a window, blocks wholly behind it are released at commit (kNoBlock in the table): a
// query at p sees (p - 6, p], so at 30 computed positions blocks 0..5 (positions 0..23) are
// gone and 24..29 stay. Swapping out copies only the live blocks; swapping in restores them.
TEST(KvCacheManager, BlocksBehindTheWindowAreReleased) {
  Fixture f(12, 4, /*encrypt=*/true, /*window=*/6);
  KvCacheManager& kv = *f.kv;
  Seq a(1, iota(40));
  kv.add(a.id);
  for (int64_t t = 1; t <= 30; ++t) run(kv, {a.entry(t)});
  const std::span<const int32_t> table = kv.table(a.id);
  ASSERT_EQ(table.size(), 8u);
  for (size_t j = 0; j < 8; ++j) EXPECT_EQ(table[j] == KvCacheManager::kNoBlock, j < 6) << j;
  // Released blocks stay in the prefix cache, unused: only 2 blocks are held.
  EXPECT_EQ(kv.released_by_preempting(a.id), 2);
  EXPECT_EQ(kv.stats().primary_used, 2);
  ASSERT_TRUE(kv.swap_out(a.id).ok());
  EXPECT_EQ(kv.stats().host_used, 2);
  run(kv, {a.entry(31)});
  EXPECT_EQ(kv.tier(a.id), KvTier::Primary);
  EXPECT_EQ(kv.stats().host_used, 0);
  EXPECT_EQ(kv.stats().primary_used, 2);  // 31 positions: blocks 6 and 7 (24..31)
  kv.remove(a.id);
  Status s = kv.check_invariants();
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(kv.stats().primary_used, 0);
}

}  // namespace
}  // namespace th
