// The host tier as a second-level prefix cache (evicted prefix blocks are
// demoted there and promoted back on a hit) and the copy thread's prefetch of
// swapped-out sequences (kv_cache_manager.h).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "kv/kv_cache_manager.h"

namespace th {
namespace {

constexpr int64_t kTierBlock = 4;

std::unique_ptr<KvCacheManager> make(Backend& backend, int64_t primary, int64_t host, bool encrypt = true) {
  KvCacheConfig c;
  c.block_size = kTierBlock;
  c.primary_blocks = primary;
  c.host_blocks = host;
  c.encrypt_host_tier = encrypt;
  auto m = KvCacheManager::create(backend, 2, 8, c);
  EXPECT_TRUE(m.ok()) << m.message();
  return std::move(m).value();
}

struct TierSeq {
  SeqId id;
  std::vector<int32_t> tokens;
  std::vector<BlockHash> hashes;
  TierSeq(SeqId i, int n, int from, std::string_view tenant = "") : id(i), tokens(static_cast<size_t>(n)) {
    std::iota(tokens.begin(), tokens.end(), from);
    extend_block_hashes(hashes, prefix_root(tenant, ""), tokens, kTierBlock);
  }
  KvStepEntry entry(int64_t target) const { return {id, target, static_cast<int64_t>(tokens.size()), hashes}; }
};

void run_step(KvCacheManager& kv, std::vector<KvStepEntry> e) {
  Status p = kv.prepare(e);
  ASSERT_TRUE(p.ok()) << p.message();
  kv.commit();
  Status s = kv.check_invariants();
  ASSERT_TRUE(s.ok()) << s.message();
}

// Every byte of the sequence's blocks (both layers, K and V) from a seed, or compared with it.
bool rows(KvCacheManager& kv, SeqId id, uint8_t seed, bool write) {
  const KvCache& p = kv.primary();
  const std::span<const int32_t> t = kv.table(id);
  for (size_t j = 0; j < t.size(); ++j)
    for (int64_t l = 0; l < 2; ++l)
      for (void* blk : {p.k_block(l, t[j]), p.v_block(l, t[j])}) {
        auto* d = static_cast<uint8_t*>(blk);
        for (size_t i = 0; i < p.block_bytes(); ++i) {
          const auto v = static_cast<uint8_t>(seed + j * 31 + static_cast<size_t>(l) * 7 + i);
          if (write) d[i] = v;
          else if (d[i] != v) return false;
        }
      }
  return true;
}

TEST(KvHostTierCache, EvictedPrefixBlocksComeBackFromTheHostTier) {
  for (bool encrypt : {true, false}) {
    std::unique_ptr<Backend> backend = make_cpu_backend();
    std::unique_ptr<KvCacheManager> kv = make(*backend, 6, 8, encrypt);
    TierSeq a(1, 13, 0), b(2, 24, 100), c(3, 13, 0), other_tenant(4, 13, 0, "bob");
    kv->add(a.id);
    run_step(*kv, {a.entry(13)});  // 4 blocks, 3 full ones published
    ASSERT_TRUE(rows(*kv, a.id, 7, /*write=*/true));
    kv->remove(a.id);
    kv->add(b.id);
    run_step(*kv, {b.entry(24)});  // 6 blocks: a's 3 cached ones are evicted, tail first, into the host tier
    EXPECT_EQ(kv->stats().demoted_blocks, 3);
    EXPECT_EQ(kv->stats().host_cached_blocks, 3);
    EXPECT_EQ(kv->stats().host_used, 0);  // cached host blocks are free for a swap-out to take
    kv->remove(b.id);

    const PrefixMatch m = kv->match_prefix(c.hashes, 13);
    EXPECT_EQ(m.blocks, 3);
    EXPECT_EQ(m.host_blocks, 3);
    EXPECT_EQ(m.cost_blocks, 3);
    EXPECT_EQ(kv->match_prefix(other_tenant.hashes, 13).blocks, 0);  // the salt still separates tenants
    kv->add(c.id);
    run_step(*kv, {c.entry(13)});
    EXPECT_EQ(kv->stats().promoted_blocks, 3);
    EXPECT_EQ(kv->stats().prefix_host_hit_tokens, 12);
    EXPECT_EQ(kv->stats().prefix_hit_tokens, 12);
    const PrefixMatch again = kv->match_prefix(c.hashes, 13);  // listed in the primary cache again
    EXPECT_EQ(again.blocks, 3);
    EXPECT_EQ(again.host_blocks, 0);
    // The promoted rows are a's; block 3 (token 12) was computed by c itself.
    const KvCache& p = kv->primary();
    std::vector<uint8_t> want(p.block_bytes());
    for (size_t j = 0; j < 3; ++j) {
      for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<uint8_t>(7 + j * 31 + 7 + i);
      EXPECT_EQ(std::memcmp(p.v_block(1, kv->table(c.id)[j]), want.data(), want.size()), 0) << j;
    }
  }
}

TEST(KvHostTierCache, WithoutAHostTierAnEvictedPrefixIsComputedAgain) {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<KvCacheManager> kv = make(*backend, 6, 0);
  TierSeq a(1, 13, 0), b(2, 24, 100), c(3, 13, 0);
  kv->add(a.id);
  run_step(*kv, {a.entry(13)});
  kv->remove(a.id);
  kv->add(b.id);
  run_step(*kv, {b.entry(24)});
  kv->remove(b.id);
  EXPECT_EQ(kv->match_prefix(c.hashes, 13).blocks, 0);
  EXPECT_EQ(kv->stats().demoted_blocks, 0);
}

TEST(KvHostTierCache, SwapOutsTakeCachedHostBlocksOldestFirst) {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<KvCacheManager> kv = make(*backend, 6, 3);
  TierSeq d(5, 8, 500), a(1, 13, 0), b(2, 16, 100);
  kv->add(d.id);
  run_step(*kv, {d.entry(8)});
  kv->add(a.id);
  run_step(*kv, {a.entry(13)});
  kv->remove(a.id);
  kv->add(b.id);
  run_step(*kv, {b.entry(16)});  // a's blocks 2, 1, 0 demoted in that order: the host tier is all cache
  EXPECT_EQ(kv->stats().demoted_blocks, 3);
  EXPECT_EQ(kv->host_free_blocks(), 3);
  ASSERT_TRUE(kv->swap_out(d.id).ok());  // 2 blocks: a's blocks 2 and 1 give way
  EXPECT_EQ(kv->stats().host_cached_blocks, 1);
  const PrefixMatch m = kv->match_prefix(TierSeq(3, 13, 0).hashes, 13);
  EXPECT_EQ(m.blocks, 1);
  EXPECT_EQ(m.host_blocks, 1);
  ASSERT_TRUE(kv->check_invariants().ok()) << kv->check_invariants().message();
}

TEST(KvHostTierCache, PrefetchedSwapInNeedsNoCopyInPrepare) {
  for (bool encrypt : {true, false}) {
    std::unique_ptr<Backend> backend = make_cpu_backend();
    std::unique_ptr<KvCacheManager> kv = make(*backend, 12, 8, encrypt);
    TierSeq a(1, 10, 0), b(2, 6, 100);
    kv->add(a.id);
    kv->add(b.id);
    run_step(*kv, {a.entry(10)});
    ASSERT_TRUE(rows(*kv, a.id, 3, /*write=*/true));
    ASSERT_TRUE(kv->swap_out(a.id).ok());
    // b's step: a's 3 blocks are copied back on the copy thread meanwhile.
    std::vector<KvStepEntry> e = {b.entry(5)};
    ASSERT_TRUE(kv->prepare(e).ok());
    const int64_t avail = kv->available_blocks();
    const SeqId ids[] = {a.id};
    kv->prefetch(ids, 1);
    EXPECT_EQ(kv->available_blocks(), avail);  // reserved blocks stay available
    kv->commit();
    ASSERT_TRUE(kv->check_invariants().ok()) << kv->check_invariants().message();
    run_step(*kv, {a.entry(11), b.entry(6)});
    EXPECT_EQ(kv->tier(a.id), KvTier::Primary);
    EXPECT_EQ(kv->stats().swapped_in_blocks, 3);
    EXPECT_EQ(kv->stats().prefetched_blocks, 3);
    EXPECT_EQ(kv->stats().prefetch_wasted_blocks, 0);
    EXPECT_TRUE(rows(*kv, a.id, 3, /*write=*/false)) << "encrypt=" << encrypt;
    EXPECT_EQ(kv->stats().host_used, 0);
  }
}

TEST(KvHostTierCache, AStepThatNeedsPrefetchedBlocksReclaimsThem) {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<KvCacheManager> kv = make(*backend, 8, 8);
  TierSeq a(1, 13, 0), b(2, 24, 100);
  kv->add(a.id);
  kv->add(b.id);
  run_step(*kv, {a.entry(12)});
  ASSERT_TRUE(kv->swap_out(a.id).ok());
  std::vector<KvStepEntry> e = {b.entry(4)};
  ASSERT_TRUE(kv->prepare(e).ok());
  const SeqId ids[] = {a.id};
  kv->prefetch(ids, 0);
  kv->commit();
  EXPECT_EQ(kv->available_blocks(), 7);  // 1 free, a's 3 cached, 3 reserved for a
  run_step(*kv, {b.entry(24)});  // 5 more blocks: the free one, the cached ones, then a's reservation
  EXPECT_EQ(kv->stats().prefetch_wasted_blocks, 3);
  kv->remove(b.id);
  run_step(*kv, {a.entry(13)});  // swapped in the slow way, all the same
  EXPECT_EQ(kv->stats().prefetched_blocks, 0);
  EXPECT_EQ(kv->stats().swapped_in_blocks, 3);
  kv->remove(a.id);
  ASSERT_TRUE(kv->check_invariants().ok()) << kv->check_invariants().message();
  EXPECT_EQ(kv->stats().primary_used, 0);
  EXPECT_EQ(kv->stats().host_used, 0);
}

TEST(KvHostTierCache, ATamperedPrefetchIsNotUsed) {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<KvCacheManager> kv = make(*backend, 12, 8);
  TierSeq a(1, 9, 0), b(2, 6, 100);
  kv->add(a.id);
  kv->add(b.id);
  run_step(*kv, {a.entry(8)});
  ASSERT_TRUE(kv->swap_out(a.id).ok());
  auto* h = static_cast<uint8_t*>(kv->host()->v_block(1, kv->table(a.id)[1]));
  h[3] ^= 1;
  std::vector<KvStepEntry> e = {b.entry(6)};
  ASSERT_TRUE(kv->prepare(e).ok());
  const SeqId ids[] = {a.id};
  kv->prefetch(ids, 0);
  kv->commit();
  ASSERT_TRUE(kv->check_invariants().ok()) << kv->check_invariants().message();
  EXPECT_EQ(kv->stats().prefetch_wasted_blocks, 2);  // dropped at commit: it did not verify
  std::vector<KvStepEntry> e2 = {a.entry(9)};
  Status s = kv->prepare(e2);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("does not verify"), std::string::npos) << s.message();
  EXPECT_EQ(kv->tier(a.id), KvTier::Host);
  ASSERT_TRUE(kv->check_invariants().ok()) << kv->check_invariants().message();
}

}  // namespace
}  // namespace th
