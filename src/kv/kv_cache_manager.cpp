#include "kv/kv_cache_manager.h"

#include <cassert>

#include <algorithm>
#include <chrono>
#include <unordered_set>

namespace th {

namespace {
int64_t blocks_for(int64_t positions, int64_t bs) { return (positions + bs - 1) / bs; }
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
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
      cache_(static_cast<int32_t>(primary_.n_blocks())) {
  if (host_) host_cache_.emplace(static_cast<int32_t>(host_->n_blocks()));
}

void KvCacheManager::add(SeqId seq) { seqs_.emplace(seq, SeqKv{}); }

void KvCacheManager::remove(SeqId seq) {
  drop(seq);
  seqs_.erase(seq);
}

int32_t KvCacheManager::take_primary() {
  BlockPool& pool = primary_.pool();
  if (pool.n_free() == 0) {
    BlockHash h;
    const int32_t victim = cache_.evict_oldest(&h);
    if (victim >= 0) {
      demote(victim, h);
      pool.release(victim);  // the cache's reference was the last one
    } else if (!prefetch_order_.empty()) {
      release_prefetch(prefetch_order_.back());
    }
  }
  return pool.take();
}

int32_t KvCacheManager::take_host() {
  BlockPool& pool = host_->pool();
  if (pool.n_free() == 0) {
    const int32_t victim = host_cache_->evict_oldest();
    if (victim >= 0) pool.release(victim);
  }
  return pool.take();
}

// Called with the victim still holding its rows: they are copied before the block is reused.
void KvCacheManager::demote(int32_t pb, const BlockHash& h) {
  if (!host_ || !config_.host_prefix_cache) return;
  if (const int32_t hb = host_cache_->find(h); hb >= 0) {  // promoted earlier and still there: now the newest
    if (host_cache_->is_unused(hb)) {
      host_cache_->mark_used(hb);
      host_cache_->mark_unused(hb);
    }
    return;
  }
  const int32_t hb = take_host();
  if (hb < 0) return;  // every host block holds a swapped-out sequence's rows
  copy_to_host_tier(pb, hb);
  host_cache_->insert(h, hb);
  host_cache_->mark_unused(hb);
  ++counts_.demoted_blocks;
}

void KvCacheManager::release_prefetch(SeqId seq) {
  auto it = prefetched_.find(seq);
  if (it == prefetched_.end()) return;
  for (int32_t b : it->second.blocks) {
    if (b == kNoBlock) continue;
    primary_.pool().release(b);
    --reserved_;
    ++counts_.prefetch_wasted_blocks;
  }
  prefetched_.erase(it);
  prefetch_order_.erase(std::find(prefetch_order_.begin(), prefetch_order_.end(), seq));
}

void KvCacheManager::settle() {
  if (!copy_busy_) return;
  const auto t0 = std::chrono::steady_clock::now();
  worker_.wait();
  counts_.swap_in_stall_seconds += seconds_since(t0);
  copy_busy_ = false;
  for (size_t i = 0; i < copying_.size(); ++i) {
    if (copy_ok_[i]) prefetched_.at(copying_[i]).ok = true;
    else release_prefetch(copying_[i]);  // a block failed verification: the swap-in copies again and reports it
  }
  copying_.clear();
}

void KvCacheManager::prefetch(std::span<const SeqId> seqs, int64_t keep_free) {
  if (!host_ || !config_.prefetch || copy_busy_) return;
  const BlockPool& pool = primary_.pool();
  for (SeqId id : seqs) {
    auto it = seqs_.find(id);
    if (it == seqs_.end() || it->second.tier != KvTier::Host || prefetched_.count(id)) continue;
    const SeqKv& s = it->second;
    const int64_t n = static_cast<int64_t>(s.table.size()) - s.n_behind;
    // Free blocks, else unused cached ones (demoted to the host tier when it has room): a
    // swapped-out sequence is live work that comes back, a cached block only may be hit.
    // Never another reservation: the bound keeps take_primary from reclaiming one.
    if (pool.n_free() + cache_.n_unused() - n < keep_free) break;  // best first: no later one overtakes it
    Prefetch p;
    p.host = s.table;
    for (int32_t hb : s.table) p.blocks.push_back(hb == kNoBlock ? kNoBlock : take_primary());
    reserved_ += n;
    prefetched_.emplace(id, std::move(p));
    prefetch_order_.push_back(id);
    copying_.push_back(id);
  }
  if (copying_.empty()) return;
  copy_ok_.assign(copying_.size(), 0);
  // The job reads only host blocks of sequences outside the step (no one frees them before
  // settle) and writes only the reserved primary blocks, which no table lists yet.
  std::vector<const Prefetch*> jobs;
  for (SeqId id : copying_) jobs.push_back(&prefetched_.at(id));
  copy_busy_ = true;
  worker_.run([this, jobs = std::move(jobs)] {
    for (size_t i = 0; i < jobs.size(); ++i) {
      bool ok = true;
      for (size_t j = 0; ok && j < jobs[i]->host.size(); ++j)
        if (jobs[i]->host[j] != kNoBlock) ok = copy_from_host_tier(jobs[i]->host[j], jobs[i]->blocks[j]).ok();
      copy_ok_[i] = ok ? 1 : 0;
    }
  });
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
  // Past the primary hits, the host tier's: each costs a new primary block to be copied into.
  if (host_cache_ && config_.host_prefix_cache) {
    for (int64_t i = m.blocks; i < limit && host_cache_->find(hashes[static_cast<size_t>(i)]) >= 0; ++i) {
      ++m.blocks;
      ++m.host_blocks;
      ++m.cost_blocks;
    }
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
  settle();
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
      const int64_t cut = m.blocks - std::min(m.blocks, e.target / bs);
      m.blocks -= cut;
      m.host_blocks = std::max<int64_t>(0, m.host_blocks - cut);
      m.tokens = m.blocks * bs;
      for (int64_t j = 0; j < m.blocks - m.host_blocks; ++j) {
        const int32_t b = cache_.find(e.hashes[static_cast<size_t>(j)]);
        if (cache_.is_unused(b)) unused_hits.push_back(b);
      }
      matches[i] = m;
      fresh += need - m.blocks + m.host_blocks;
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
  for (const KvStepEntry& e : entries) txn_.push_back({e.seq, seqs_.at(e.seq), e.target, e.n_tokens, e.hashes, 0});
  // The step's own prefetched copies are taken out of reach of take_primary's reclaiming.
  std::unordered_map<SeqId, Prefetch> claimed = claim_prefetches(entries);
  auto release = [&](const Prefetch& p) {
    for (int32_t b : p.blocks)
      if (b != kNoBlock) {
        primary_.pool().release(b);
        ++counts_.prefetch_wasted_blocks;
      }
  };
  auto release_claimed = [&] {
    for (auto& [id, p] : claimed) release(p);
    claimed.clear();
  };
  auto fail = [&](Status st) {
    release_claimed();
    rollback();
    return st;
  };
  // Primary prefix hits first: once referenced, no eviction below can take them.
  for (size_t i = 0; i < entries.size(); ++i) {
    SeqKv& s = seqs_.at(entries[i].seq);
    if (s.tier != KvTier::None) continue;
    for (int64_t j = 0; j < matches[i].blocks - matches[i].host_blocks; ++j) {
      const int32_t b = cache_.find(entries[i].hashes[static_cast<size_t>(j)]);
      use_cached(b);
      s.table.push_back(b);
    }
    s.tier = KvTier::Primary;
    s.computed = matches[i].tokens;
    s.n_published = matches[i].blocks;
  }
  if (Status st = promote_host_hits(entries, matches); !st.ok()) return fail(st);
  for (const KvStepEntry& e : entries) {
    SeqKv& s = seqs_.at(e.seq);
    const size_t need = static_cast<size_t>(blocks_for(e.target, bs));
    if (s.tier == KvTier::Host) {
      for (int32_t hb : s.table) counts_.swapped_in_blocks += hb == kNoBlock ? 0 : 1;
      std::vector<int32_t> table;
      if (auto pf = claimed.find(e.seq); pf != claimed.end()) {
        if (pf->second.ok && pf->second.host == s.table) {
          table = std::move(pf->second.blocks);  // the copy thread filled them during an earlier step
          for (int32_t b : table) counts_.prefetched_blocks += b == kNoBlock ? 0 : 1;
        } else {
          release(pf->second);  // before taking blocks: the dry run counted these as available
        }
        claimed.erase(pf);
      }
      for (size_t j = table.size(); j < need; ++j) {
        if (j < s.table.size() && s.table[j] == kNoBlock) {  // released behind the window
          table.push_back(kNoBlock);
          continue;
        }
        table.push_back(take_primary());
        if (j >= s.table.size()) continue;
        const auto t0 = std::chrono::steady_clock::now();
        Status st = copy_from_host_tier(s.table[j], table.back());
        counts_.swap_in_stall_seconds += seconds_since(t0);
        if (!st.ok()) {
          // As a finished swap-in would leave it, so that rollback releases the primary blocks
          // and restores the host table.
          s.table = std::move(table);
          s.tier = KvTier::Primary;
          s.n_published = 0;
          return fail(st);
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

std::unordered_map<SeqId, KvCacheManager::Prefetch> KvCacheManager::claim_prefetches(
    std::span<const KvStepEntry> entries) {
  std::unordered_map<SeqId, Prefetch> claimed;
  for (const KvStepEntry& e : entries) {
    auto it = prefetched_.find(e.seq);
    if (it == prefetched_.end()) continue;
    for (int32_t b : it->second.blocks) reserved_ -= b == kNoBlock ? 0 : 1;
    claimed.emplace(e.seq, std::move(it->second));
    prefetched_.erase(it);
    prefetch_order_.erase(std::find(prefetch_order_.begin(), prefetch_order_.end(), e.seq));
  }
  return claimed;
}

// Each waiting entry's host-tier prefix hits, in order, into new primary blocks listed in the
// primary prefix cache. The hits are pinned (off the host LRU list) while a demotion that
// take_primary makes may need a host block.
Status KvCacheManager::promote_host_hits(std::span<const KvStepEntry> entries, const std::vector<PrefixMatch>& matches) {
  std::vector<int32_t> pinned;
  for (size_t i = 0; i < entries.size(); ++i)
    for (int64_t j = matches[i].blocks - matches[i].host_blocks; j < matches[i].blocks; ++j) {
      const int32_t hb = host_cache_->find(entries[i].hashes[static_cast<size_t>(j)]);
      if (host_cache_->is_unused(hb)) {
        host_cache_->mark_used(hb);
        pinned.push_back(hb);
      }
    }
  Status st;
  for (size_t i = 0; i < entries.size() && st.ok(); ++i) {
    SeqKv& s = seqs_.at(entries[i].seq);
    for (int64_t j = matches[i].blocks - matches[i].host_blocks; j < matches[i].blocks && st.ok(); ++j) {
      const BlockHash& h = entries[i].hashes[static_cast<size_t>(j)];
      if (const int32_t b = cache_.find(h); b >= 0) {  // an earlier entry of this step promoted it
        use_cached(b);
        s.table.push_back(b);
        continue;
      }
      const int32_t b = take_primary();
      s.table.push_back(b);  // rollback releases it, listed or not
      const auto t0 = std::chrono::steady_clock::now();
      st = copy_from_host_tier(host_cache_->find(h), b);
      counts_.swap_in_stall_seconds += seconds_since(t0);
      if (!st.ok()) break;
      primary_.pool().add_ref(b);
      cache_.insert(h, b);
      ++counts_.promoted_blocks;
      ++txn_[i].promoted;
    }
  }
  for (int32_t hb : pinned) host_cache_->mark_unused(hb);
  return st;
}

void KvCacheManager::commit() {
  settle();  // the copy thread ran during the forward pass
  const int64_t bs = block_size();
  for (Undo& u : txn_) {
    SeqKv& s = seqs_.at(u.seq);
    if (u.before.tier == KvTier::Host) {
      for (auto it = u.before.table.rbegin(); it != u.before.table.rend(); ++it)
        if (*it != kNoBlock) host_->pool().release(*it);
    }
    if (u.before.tier == KvTier::None) {
      counts_.prefix_query_tokens += u.n_tokens;
      counts_.prefix_hit_tokens += s.computed;
      counts_.prefix_host_hit_tokens += u.promoted * bs;
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
  settle();
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
  settle();
  if (s.tier != KvTier::Primary) return Status::errorf("KV swap-out: sequence ", seq, " is not in the primary tier");
  if (!host_) return Status::error("KV swap-out: no host tier");
  const int64_t n = static_cast<int64_t>(s.table.size()) - s.n_behind;
  if (host_free_blocks() < n)
    return Status::errorf("KV swap-out: ", n, " blocks needed, ", host_free_blocks(), " free in the host tier");
  std::vector<int32_t> host_table;
  const int64_t behind = s.n_behind;
  for (int32_t b : s.table) {
    if (b == kNoBlock) {
      host_table.push_back(kNoBlock);
      continue;
    }
    host_table.push_back(take_host());  // never -1: host_free_blocks() counted it
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
  settle();
  release_prefetch(seq);
  SeqKv& s = seqs_.at(seq);
  if (s.tier != KvTier::None) release_table(s);
  s = SeqKv{};
}

Status KvCacheManager::check_invariants() const {
  if (in_txn_) return Status::error("KV invariants: checked inside a transaction");
  if (copy_busy_) return Status::error("KV invariants: checked while the copy thread runs");
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
  int64_t reserved = 0;
  for (const auto& [id, p] : prefetched_) {
    if (seqs_.at(id).tier != KvTier::Host) return Status::errorf("KV invariants: sequence ", id, " is prefetched but not swapped out");
    for (int32_t b : p.blocks)
      if (b != kNoBlock) {
        ++refs[static_cast<size_t>(b)];
        ++reserved;
      }
  }
  if (reserved != reserved_ || prefetch_order_.size() != prefetched_.size())
    return Status::errorf("KV invariants: ", reserved, " blocks prefetched but ", reserved_, " counted");
  if (host_cache_) {
    int32_t host_listed = 0;
    for (int32_t b = 0; b < host_->pool().n_blocks(); ++b) {
      if (!host_cache_->contains(b)) continue;
      ++host_refs[static_cast<size_t>(b)];
      ++host_listed;
      if (!host_cache_->is_unused(b)) return Status::errorf("KV invariants: host cached block ", b, " is not on its LRU list");
    }
    if (host_listed != host_cache_->size() || host_listed != host_cache_->n_unused())
      return Status::error("KV invariants: host prefix cache map, block flags and LRU list disagree");
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
    st.host_free = host_free_blocks();
    st.host_used = st.host_blocks - st.host_free;
    st.host_cached_blocks = host_cache_->size();
  }
  st.cached_blocks = cache_.size();
  st.cached_unused = cache_.n_unused();
  st.prefix_query_tokens = counts_.prefix_query_tokens;
  st.prefix_hit_tokens = counts_.prefix_hit_tokens;
  st.prefix_host_hit_tokens = counts_.prefix_host_hit_tokens;
  st.demoted_blocks = counts_.demoted_blocks;
  st.promoted_blocks = counts_.promoted_blocks;
  st.swapped_in_blocks = counts_.swapped_in_blocks;
  st.prefetched_blocks = counts_.prefetched_blocks;
  st.prefetch_wasted_blocks = counts_.prefetch_wasted_blocks;
  st.swap_in_stall_seconds = counts_.swap_in_stall_seconds;
  return st;
}

}  // namespace th
