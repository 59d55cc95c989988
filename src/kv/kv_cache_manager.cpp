#include "kv/kv_cache_manager.h"

#include <cassert>

#include <algorithm>
#include <unordered_set>

namespace th {

namespace {
int64_t blocks_for(int64_t positions, int64_t bs) { return (positions + bs - 1) / bs; }
}  // namespace

Result<std::unique_ptr<KvCacheManager>> KvCacheManager::create(Backend& backend, int64_t n_layer, int64_t kv_dim,
                                                               const KvCacheConfig& c) {
  if (c.host_blocks < 0) return Status::errorf("host KV tier of ", c.host_blocks, " blocks is out of range");
  TH_ASSIGN_OR_RETURN(KvCache primary,
                      KvCache::create(backend, n_layer, kv_dim, c.primary_blocks, c.block_size, c.type));
  std::optional<KvCache> host;
  if (c.host_blocks > 0) {
    TH_ASSIGN_OR_RETURN(KvCache h, KvCache::create_host(n_layer, kv_dim, c.host_blocks, c.block_size, c.type));
    host.emplace(std::move(h));
  }
  std::optional<HostTierCipher> cipher;
  if (host && c.encrypt_host_tier) {
    TH_ASSIGN_OR_RETURN(HostTierCipher hc, HostTierCipher::create(c.host_blocks));
    cipher.emplace(std::move(hc));
  }
  return std::unique_ptr<KvCacheManager>(
      new KvCacheManager(backend, std::move(primary), std::move(host), std::move(cipher), c));
}

KvCacheManager::KvCacheManager(Backend& b, KvCache primary, std::optional<KvCache> host,
                               std::optional<HostTierCipher> cipher, const KvCacheConfig& c)
    : backend_(&b), config_(c), primary_(std::move(primary)), host_(std::move(host)), cipher_(std::move(cipher)),
      cache_(static_cast<int32_t>(primary_.n_blocks())) {}

void KvCacheManager::add(SeqId seq) { seqs_.emplace(seq, SeqKv{}); }

void KvCacheManager::remove(SeqId seq) {
  drop(seq);
  seqs_.erase(seq);
}

int32_t KvCacheManager::take_primary() {
  BlockPool& pool = primary_.pool();
  if (pool.n_free() == 0) {
    const int32_t victim = cache_.evict_oldest();
    if (victim >= 0) pool.release(victim);  // the cache's reference was the last one
  }
  return pool.take();
}

void KvCacheManager::use_cached(int32_t b) {
  primary_.pool().add_ref(b);
  if (cache_.is_unused(b)) cache_.mark_used(b);
}

void KvCacheManager::release_primary(int32_t b) {
  if (primary_.pool().release(b) == 1 && cache_.contains(b)) cache_.mark_unused(b);
}

void KvCacheManager::release_table(SeqKv& s) {
  for (auto it = s.table.rbegin(); it != s.table.rend(); ++it) {
    if (*it == kNoBlock) continue;
    if (s.tier == KvTier::Primary) release_primary(*it);
    else host_->pool().release(*it);
  }
  s.table.clear();
  s.n_behind = 0;
}

// A query at position p sees (p - window, p]; the next one a sequence makes is at `computed`,
// so positions before computed - window + 1 are never read again. Released in reverse, as
// release_table does, so that the prefix cache evicts their tail first.
void KvCacheManager::release_behind_window(SeqKv& s) {
  if (config_.window <= 0 || s.tier != KvTier::Primary) return;
  const int64_t behind = std::max<int64_t>(0, s.computed - config_.window + 1) / block_size();
  for (int64_t i = behind - 1; i >= s.n_behind; --i) {
    int32_t& b = s.table[static_cast<size_t>(i)];
    if (b == kNoBlock) continue;
    release_primary(b);
    b = kNoBlock;
  }
  s.n_behind = std::max(s.n_behind, behind);
}

void KvCacheManager::copy_to_host_tier(int32_t pb, int32_t hb) {
  const size_t n = primary_.block_bytes();
  HostTierCipher::Pieces pieces;
  for (int64_t l = 0; l < primary_.n_layer(); ++l) {
    backend_->copy_to_host(primary_.k_block(l, pb), host_->k_block(l, hb), n);
    backend_->copy_to_host(primary_.v_block(l, pb), host_->v_block(l, hb), n);
    pieces.emplace_back(static_cast<uint8_t*>(host_->k_block(l, hb)), n);
    pieces.emplace_back(static_cast<uint8_t*>(host_->v_block(l, hb)), n);
  }
  // Sealing cannot fail short of OpenSSL itself failing; then the engine's invariant is gone.
  if (cipher_) {
    Status s = cipher_->seal(hb, pieces);
    assert(s.ok());
    (void)s;
  }
}

Status KvCacheManager::copy_from_host_tier(int32_t hb, int32_t pb) {
  const size_t n = primary_.block_bytes();
  if (!cipher_) {
    for (int64_t l = 0; l < primary_.n_layer(); ++l) {
      backend_->copy_from_host(host_->k_block(l, hb), primary_.k_block(l, pb), n);
      backend_->copy_from_host(host_->v_block(l, hb), primary_.v_block(l, pb), n);
    }
    return ok_status();
  }
  std::vector<std::pair<const uint8_t*, size_t>> pieces;
  for (int64_t l = 0; l < primary_.n_layer(); ++l) {
    pieces.emplace_back(static_cast<const uint8_t*>(host_->k_block(l, hb)), n);
    pieces.emplace_back(static_cast<const uint8_t*>(host_->v_block(l, hb)), n);
  }
  return cipher_->open(hb, pieces, [&](size_t i, const uint8_t* plain, size_t len) {
    const int64_t l = static_cast<int64_t>(i / 2);
    backend_->copy_from_host(plain, i % 2 == 0 ? primary_.k_block(l, pb) : primary_.v_block(l, pb), len);
  });
}

PrefixMatch KvCacheManager::match_prefix(std::span<const BlockHash> hashes, int64_t n_tokens) const {
  PrefixMatch m;
  if (!config_.prefix_caching || n_tokens < 1) return m;
  const int64_t bs = block_size();
  const int64_t limit = std::min<int64_t>((n_tokens - 1) / bs, static_cast<int64_t>(hashes.size()));
  for (int64_t i = 0; i < limit; ++i) {
    const int32_t b = cache_.find(hashes[static_cast<size_t>(i)]);
    if (b < 0) break;
    ++m.blocks;
    // refcount 1: only the cache holds it (taking it shrinks the evictable set);
    // 2: one sequence does, and preempting that one would count the block as freed.
    if (primary_.pool().refcount(b) <= 2) ++m.cost_blocks;
  }
  m.tokens = m.blocks * bs;
  return m;
}

int64_t KvCacheManager::released_by_preempting(SeqId seq) const {
  const SeqKv& s = seqs_.at(seq);
  if (s.tier != KvTier::Primary) return 0;
  int64_t n = 0;
  for (int32_t b : s.table) {
    if (b == kNoBlock) continue;
    const int32_t r = primary_.pool().refcount(b);
    if (r == 1 || (r == 2 && cache_.contains(b))) ++n;
  }
  return n;
}

Status KvCacheManager::prepare(std::span<const KvStepEntry> entries) {
  if (in_txn_) return Status::error("KV prepare: a transaction is already open");
  const int64_t bs = block_size();
  // Dry run: what the step needs, so that a failure changes nothing.
  std::vector<PrefixMatch> matches(entries.size());
  std::vector<int32_t> unused_hits;
  std::unordered_set<SeqId> seen;
  int64_t fresh = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const KvStepEntry& e = entries[i];
    auto it = seqs_.find(e.seq);
    if (it == seqs_.end()) return Status::errorf("KV prepare: unknown sequence ", e.seq);
    if (!seen.insert(e.seq).second) return Status::errorf("KV prepare: sequence ", e.seq, " appears twice");
    const SeqKv& s = it->second;
    if (e.target < s.computed || e.target < 0)
      return Status::errorf("KV prepare: sequence ", e.seq, " target ", e.target, " is behind its ", s.computed,
                            " computed positions");
    const int64_t need = blocks_for(e.target, bs);
    if (s.tier == KvTier::Host && !host_) return Status::error("KV prepare: no host tier");
    if (s.tier == KvTier::None) {
      PrefixMatch m = match_prefix(e.hashes, e.n_tokens);
      m.blocks = std::min(m.blocks, e.target / bs);
      m.tokens = m.blocks * bs;
      for (int64_t j = 0; j < m.blocks; ++j) {
        const int32_t b = cache_.find(e.hashes[static_cast<size_t>(j)]);
        if (cache_.is_unused(b)) unused_hits.push_back(b);
      }
      matches[i] = m;
      fresh += need - m.blocks;
    } else if (s.tier == KvTier::Host) {
      fresh += need - s.n_behind;
    } else {
      fresh += std::max<int64_t>(0, need - static_cast<int64_t>(s.table.size()));
    }
  }
  std::sort(unused_hits.begin(), unused_hits.end());
  const int64_t taken = fresh + (std::unique(unused_hits.begin(), unused_hits.end()) - unused_hits.begin());
  if (taken > available_blocks())
    return Status::errorf("KV prepare: the step needs ", taken, " blocks, ", available_blocks(), " are available");

  in_txn_ = true;
  txn_.clear();
  for (const KvStepEntry& e : entries) txn_.push_back({e.seq, seqs_.at(e.seq), e.target, e.n_tokens, e.hashes});
  // Prefix hits first: once referenced, no eviction below can take them.
  for (size_t i = 0; i < entries.size(); ++i) {
    SeqKv& s = seqs_.at(entries[i].seq);
    if (s.tier != KvTier::None) continue;
    for (int64_t j = 0; j < matches[i].blocks; ++j) {
      const int32_t b = cache_.find(entries[i].hashes[static_cast<size_t>(j)]);
      use_cached(b);
      s.table.push_back(b);
    }
    s.tier = KvTier::Primary;
    s.computed = matches[i].tokens;
    s.n_published = matches[i].blocks;
  }
  for (const KvStepEntry& e : entries) {
    SeqKv& s = seqs_.at(e.seq);
    const size_t need = static_cast<size_t>(blocks_for(e.target, bs));
    if (s.tier == KvTier::Host) {
      std::vector<int32_t> table;
      for (size_t j = 0; j < need; ++j) {
        if (j < s.table.size() && s.table[j] == kNoBlock) {  // released behind the window
          table.push_back(kNoBlock);
          continue;
        }
        table.push_back(take_primary());
        if (j >= s.table.size()) continue;
        if (Status st = copy_from_host_tier(s.table[j], table.back()); !st.ok()) {
          // As a finished swap-in would leave it, so that rollback releases the primary blocks
          // and restores the host table.
          s.table = std::move(table);
          s.tier = KvTier::Primary;
          s.n_published = 0;
          rollback();
          return st;
        }
      }
      s.table = std::move(table);  // the host blocks are released at commit (the undo log keeps them)
      s.tier = KvTier::Primary;
      s.n_published = 0;
    }
    while (s.table.size() < need) s.table.push_back(take_primary());
  }
  return ok_status();
}

void KvCacheManager::commit() {
  const int64_t bs = block_size();
  for (Undo& u : txn_) {
    SeqKv& s = seqs_.at(u.seq);
    if (u.before.tier == KvTier::Host) {
      for (auto it = u.before.table.rbegin(); it != u.before.table.rend(); ++it)
        if (*it != kNoBlock) host_->pool().release(*it);
    }
    if (u.before.tier == KvTier::None) {
      prefix_query_tokens_ += u.n_tokens;
      prefix_hit_tokens_ += s.computed;
    }
    s.computed = u.target;
    if (config_.prefix_caching) {
      const int64_t full = std::min<int64_t>(s.computed / bs, static_cast<int64_t>(u.hashes.size()));
      for (int64_t i = s.n_published; i < full; ++i) {
        const int32_t b = s.table[static_cast<size_t>(i)];
        const BlockHash& h = u.hashes[static_cast<size_t>(i)];
        // A block already listed is a hit; another block with the same hash was computed
        // by another sequence in the meantime: this copy stays private.
        if (b == kNoBlock || cache_.contains(b) || cache_.find(h) >= 0) continue;
        primary_.pool().add_ref(b);
        cache_.insert(h, b);
      }
      s.n_published = std::max(s.n_published, full);
    }
    release_behind_window(s);  // after publishing: the prefix cache keeps what it listed
  }
  txn_.clear();
  in_txn_ = false;
}

void KvCacheManager::rollback() {
  for (auto u = txn_.rbegin(); u != txn_.rend(); ++u) {
    SeqKv& s = seqs_.at(u->seq);
    if (u->before.tier == KvTier::Primary) {
      while (s.table.size() > u->before.table.size()) {
        release_primary(s.table.back());
        s.table.pop_back();
      }
    } else {
      release_table(s);  // prefix hits and new blocks; a swap-in's host blocks were never released
    }
    s = std::move(u->before);
  }
  txn_.clear();
  in_txn_ = false;
}

Status KvCacheManager::swap_out(SeqId seq) {
  SeqKv& s = seqs_.at(seq);
  if (in_txn_) return Status::error("KV swap-out inside a transaction");
  if (s.tier != KvTier::Primary) return Status::errorf("KV swap-out: sequence ", seq, " is not in the primary tier");
  if (!host_) return Status::error("KV swap-out: no host tier");
  const int64_t n = static_cast<int64_t>(s.table.size()) - s.n_behind;
  if (host_->pool().n_free() < n)
    return Status::errorf("KV swap-out: ", n, " blocks needed, ", host_->pool().n_free(), " free in the host tier");
  std::vector<int32_t> host_table;
  const int64_t behind = s.n_behind;
  for (int32_t b : s.table) {
    if (b == kNoBlock) {
      host_table.push_back(kNoBlock);
      continue;
    }
    host_table.push_back(host_->pool().take());
    copy_to_host_tier(b, host_table.back());
  }
  release_table(s);
  s.table = std::move(host_table);
  s.tier = KvTier::Host;
  s.n_published = 0;
  s.n_behind = behind;
  return ok_status();
}

void KvCacheManager::drop(SeqId seq) {
  SeqKv& s = seqs_.at(seq);
  if (s.tier != KvTier::None) release_table(s);
  s = SeqKv{};
}

Status KvCacheManager::check_invariants() const {
  if (in_txn_) return Status::error("KV invariants: checked inside a transaction");
  const int64_t bs = block_size();
  const BlockPool& pool = primary_.pool();
  std::vector<int32_t> refs(static_cast<size_t>(pool.n_blocks()), 0);
  std::vector<int32_t> host_refs(host_ ? static_cast<size_t>(host_->pool().n_blocks()) : 0, 0);
  for (const auto& [id, s] : seqs_) {
    if (static_cast<int64_t>(s.table.size()) != blocks_for(s.computed, bs))
      return Status::errorf("KV invariants: sequence ", id, " has ", s.table.size(), " blocks for ", s.computed,
                            " positions");
    if (s.tier == KvTier::None && s.computed != 0)
      return Status::errorf("KV invariants: sequence ", id, " has positions but no tier");
    for (size_t j = 0; j < s.table.size(); ++j) {
      const int32_t b = s.table[j];
      if (b == kNoBlock) {
        if (static_cast<int64_t>(j) >= s.n_behind)
          return Status::errorf("KV invariants: sequence ", id, " has no block ", j, " within its window");
        continue;
      }
      if (s.tier == KvTier::Primary) ++refs[static_cast<size_t>(b)];
      else if (s.tier == KvTier::Host) ++host_refs[static_cast<size_t>(b)];
    }
  }
  int32_t listed = 0;
  for (int32_t b = 0; b < pool.n_blocks(); ++b) {
    if (cache_.contains(b)) {
      ++refs[static_cast<size_t>(b)];
      ++listed;
    }
    if (refs[static_cast<size_t>(b)] != pool.refcount(b))
      return Status::errorf("KV invariants: primary block ", b, " has refcount ", pool.refcount(b), " but ",
                            refs[static_cast<size_t>(b)], " references");
    const bool should_be_unused = cache_.contains(b) && pool.refcount(b) == 1;
    if (cache_.is_unused(b) != should_be_unused)
      return Status::errorf("KV invariants: primary block ", b, " is ", cache_.is_unused(b) ? "" : "not ",
                            "on the LRU list");
  }
  if (listed != cache_.size()) return Status::error("KV invariants: prefix cache map and block flags disagree");
  if (static_cast<int32_t>(cache_.unused_blocks().size()) != cache_.n_unused())
    return Status::error("KV invariants: LRU list length and count disagree");
  auto check_free = [](const BlockPool& p, const std::vector<int32_t>& expect, const char* tier) -> Status {
    std::vector<uint8_t> on_list(static_cast<size_t>(p.n_blocks()), 0);
    for (int32_t b : p.free_list()) {
      if (on_list[static_cast<size_t>(b)]++) return Status::errorf("KV invariants: ", tier, " block ", b, " is free twice");
      if (p.refcount(b) != 0) return Status::errorf("KV invariants: ", tier, " block ", b, " is free but referenced");
    }
    for (int32_t b = 0; b < p.n_blocks(); ++b) {
      if (p.refcount(b) != expect[static_cast<size_t>(b)])
        return Status::errorf("KV invariants: ", tier, " block ", b, " has refcount ", p.refcount(b), " but ",
                              expect[static_cast<size_t>(b)], " references");
      if (p.refcount(b) == 0 && !on_list[static_cast<size_t>(b)])
        return Status::errorf("KV invariants: ", tier, " block ", b, " is leaked (no reference, not free)");
    }
    return ok_status();
  };
  TH_RETURN_IF_ERROR(check_free(pool, refs, "primary"));
  if (host_) TH_RETURN_IF_ERROR(check_free(host_->pool(), host_refs, "host"));
  return ok_status();
}

KvCacheStats KvCacheManager::stats() const {
  KvCacheStats st;
  st.primary_blocks = primary_.n_blocks();
  st.primary_free = available_blocks();
  st.primary_used = st.primary_blocks - st.primary_free;
  if (host_) {
    st.host_blocks = host_->n_blocks();
    st.host_free = host_->pool().n_free();
    st.host_used = st.host_blocks - st.host_free;
  }
  st.cached_blocks = cache_.size();
  st.cached_unused = cache_.n_unused();
  st.prefix_query_tokens = prefix_query_tokens_;
  st.prefix_hit_tokens = prefix_hit_tokens_;
  return st;
}

}  // namespace th
