// The serving engine's KV memory: a primary tier (backend memory, what the
// forward pass reads) with a prefix cache over it, a host tier that holds
// swapped-out sequences and the prefix blocks evicted from the primary tier
// (a second-level prefix cache), and a block table per sequence.
//
// Host tier as a cache: a prefix block evicted from the primary tier is copied
// (sealed, when encrypting) into a host block listed in the host prefix cache;
// a later lookup that runs past the primary hits continues there, and prepare
// copies each such hit into a new primary block (promotion) instead of the
// step computing it. Host cached blocks are held by the host cache only and
// are evicted, oldest first, whenever a swap-out or a demotion needs a block.
//
// Prefetch: after prepare, `prefetch` reserves primary blocks for
// swapped-out sequences and copies their host blocks into them on a copy
// thread while the forward pass runs; commit waits for it. A swap-in that
// finds its copy done takes the blocks as they are. Reserved blocks count as
// available: a step that needs them reclaims them (the copy is then wasted).
//
// A step's allocation is a transaction: `prepare` reserves every block the
// step needs (prefix hits, new blocks, swap-ins) or fails having changed
// nothing but the order of the cache's LRU list; `commit` runs after the
// forward pass and publishes the newly full blocks to the prefix cache;
// `rollback` undoes a prepare whose forward pass failed.
//
// Reference counts: every occurrence of a block in a table is one reference,
// and so is the prefix cache's listing of it. `check_invariants` verifies this
// (and the free and LRU lists) from scratch.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"
#include "kv/block_hash.h"
#include "kv/copy_worker.h"
#include "kv/host_tier_cipher.h"
#include "kv/kv_cache.h"
#include "kv/prefix_cache.h"

namespace th {

using SeqId = int64_t;

struct KvCacheConfig {
  int64_t block_size = 16;      // positions per block
  int64_t primary_blocks = 0;   // blocks in backend memory
  int64_t host_blocks = 0;      // blocks in host memory; 0: no host tier (preemption always recomputes)
  DType type = DType::F32;      // f32, f16, bf16 or q8_0
  bool prefix_caching = true;
  bool encrypt_host_tier = true;  // host blocks sealed with AES-256-GCM under a per-process key (host_tier_cipher.h)
  // > 0: every layer attends to the last `window` positions only (a model whose layers all have
  // a sliding window): blocks wholly behind it are released at commit. One layer without a
  // window (Gemma 2/3 alternate) needs every block: 0.
  int64_t window = 0;
  // With a host tier and prefix_caching: evicted prefix blocks move to the host tier and
  // come back on a hit.
  bool host_prefix_cache = true;
  // With a host tier: swapped-out sequences are copied back on the copy thread (see `prefetch`).
  bool prefetch = true;
};

enum class KvTier : uint8_t { None, Primary, Host };

/// @brief The leading full blocks of a sequence found in the prefix cache.
struct PrefixMatch {
  int64_t blocks = 0;       // usable cached blocks (never covering the last token, whose logits are needed)
  int64_t tokens = 0;       // blocks * block_size
  int64_t cost_blocks = 0;  // available blocks that taking them may use up (see match_prefix)
  int64_t host_blocks = 0;  // of `blocks`, the trailing ones found in the host tier (each copied into a new block)
};

/// @brief One sequence's part in a step's transaction.
struct KvStepEntry {
  SeqId seq = 0;
  int64_t target = 0;                 // positions with K/V once the step's forward pass has run
  int64_t n_tokens = 0;               // tokens the sequence has (caps its prefix lookup)
  std::span<const BlockHash> hashes;  // its full blocks' hashes; must stay valid until commit or rollback
};

struct KvCacheStats {
  int64_t primary_blocks = 0, primary_used = 0, primary_free = 0;  // free counts unused cached blocks
  int64_t host_blocks = 0, host_used = 0, host_free = 0;
  int64_t cached_blocks = 0, cached_unused = 0;
  int64_t prefix_query_tokens = 0, prefix_hit_tokens = 0;  // over every prefix lookup an admission made
  int64_t prefix_host_hit_tokens = 0;  // of prefix_hit_tokens, those promoted from the host tier
  int64_t host_cached_blocks = 0;      // host blocks listed in the host prefix cache
  int64_t demoted_blocks = 0, promoted_blocks = 0;  // prefix blocks moved primary -> host, host -> primary
  int64_t swapped_in_blocks = 0;       // blocks of swapped-out sequences brought back
  int64_t prefetched_blocks = 0;       // of those, copied ahead by the copy thread
  int64_t prefetch_wasted_blocks = 0;  // copied ahead, then reclaimed or dropped unused
  // Time the engine thread waited for host -> primary copies: swap-ins and promotions
  // copied in prepare, and the copy thread still running when the forward pass was done.
  double swap_in_stall_seconds = 0;
};

class KvCacheManager {
 public:
  static Result<std::unique_ptr<KvCacheManager>> create(Backend& backend, int64_t n_layer, int64_t kv_dim,
                                                        const KvCacheConfig& config);

  KvCache& primary() { return primary_; }
  const KvCache& primary() const { return primary_; }
  int64_t block_size() const { return primary_.block_size(); }
  bool has_host_tier() const { return host_.has_value(); }
  /// @brief The host tier (null without one), for inspection.
  const KvCache* host() const { return host_ ? &*host_ : nullptr; }

  // --- Sequences
  /// @brief Registers a sequence with no blocks.
  void add(SeqId seq);
  /// @brief Releases whatever the sequence holds and forgets it.
  void remove(SeqId seq);
  KvTier tier(SeqId seq) const { return seqs_.at(seq).tier; }
  /// @brief Positions of the sequence whose K/V are in its blocks.
  int64_t computed(SeqId seq) const { return seqs_.at(seq).computed; }
  /// @brief The sequence's block per block_size positions; kNoBlock for a block released
  /// behind the sliding window (KvCacheConfig::window: no attention reads it again).
  std::span<const int32_t> table(SeqId seq) const { return seqs_.at(seq).table; }
  static constexpr int32_t kNoBlock = -1;

  // --- Queries for the scheduler; no side effects
  /// @brief Cached leading blocks of a sequence of n_tokens tokens with these full-block hashes.
  /// At most (n_tokens - 1) / block_size blocks: the last token is always computed again (its
  /// logits are needed), and it goes to a block of the sequence's own. cost_blocks counts the
  /// hits a scheduler must pay for: blocks no sequence uses (they leave the evictable set) and,
  /// conservatively, blocks only one sequence uses (preempting it this step would count them
  /// as freed).
  PrefixMatch match_prefix(std::span<const BlockHash> hashes, int64_t n_tokens) const;
  /// @brief Primary blocks that would become free or evictable if the sequence released its
  /// blocks now: those no other sequence shares.
  int64_t released_by_preempting(SeqId seq) const;
  /// @brief Primary blocks a step may take: free ones, cached ones no sequence uses and
  /// ones reserved by a prefetch (reclaimed when needed).
  int64_t available_blocks() const { return primary_.pool().n_free() + cache_.n_unused() + reserved_; }
  /// @brief Host blocks a swap-out may take: free ones and host cached ones.
  int64_t host_free_blocks() const { return host_ ? host_->pool().n_free() + host_cache_->n_unused() : 0; }

  // --- The step's transaction
  /// @brief Reserves every block the entries need, or nothing. A sequence with no blocks first
  /// takes its prefix hits (computed() then says how many positions they cover); a swapped-out
  /// sequence comes back to the primary tier. Fails if the blocks are not there or an entry is
  /// malformed. Only one transaction at a time.
  [[nodiscard]] Status prepare(std::span<const KvStepEntry> entries);
  /// @brief After the forward pass: each entry's computed() becomes its target, full blocks go
  /// into the prefix cache, and swapped-in sequences' host blocks are released.
  void commit();
  /// @brief Undoes prepare (the forward pass failed).
  void rollback();
  /// @brief Inside a transaction, after prepare: starts copying the listed swapped-out
  /// sequences (best first; others are skipped) into primary blocks on the copy thread (free
  /// ones, else unused cached ones evicted for them), stopping at the first that would leave
  /// fewer than `keep_free` free or evictable blocks. Commit and rollback wait for the copies.
  /// Does nothing without a host tier or with prefetch off.
  void prefetch(std::span<const SeqId> seqs, int64_t keep_free);

  // --- Preemption
  /// @brief Copies the sequence's blocks to the host tier and releases them in the primary
  /// one. Fails (changing nothing) without a host tier or enough free host blocks.
  [[nodiscard]] Status swap_out(SeqId seq);
  /// @brief Releases the sequence's blocks in either tier; it will be computed again from its tokens.
  void drop(SeqId seq);

  /// @brief Recounts every reference from the tables and the cache and checks them, the free
  /// lists and the LRU list against the pools. Call outside a transaction.
  Status check_invariants() const;
  KvCacheStats stats() const;

 private:
  struct SeqKv {
    KvTier tier = KvTier::None;
    std::vector<int32_t> table;  // block ids in `tier`'s pool
    int64_t computed = 0;
    int64_t n_published = 0;     // leading blocks already offered to the prefix cache
    int64_t n_behind = 0;        // leading blocks released behind the sliding window (kNoBlock)
  };
  struct Undo {
    SeqId seq;
    SeqKv before;  // the sequence as it was (for a swap-in, its host table: released at commit)
    int64_t target;
    int64_t n_tokens;
    std::span<const BlockHash> hashes;
    int64_t promoted = 0;  // prefix hits copied from the host tier
  };
  // Primary blocks reserved for a swapped-out sequence, one per entry of its host table
  // (kNoBlock where that has none), filled by the copy thread.
  struct Prefetch {
    std::vector<int32_t> blocks;
    std::vector<int32_t> host;  // its host table when the copy started
    bool ok = false;            // the copy thread finished and verified every block
  };

  KvCacheManager(Backend& b, KvCache primary, std::optional<KvCache> host, std::optional<HostTierCipher> cipher,
                 const KvCacheConfig& c);
  int32_t take_primary();                  // a free block, evicting the oldest unused cached one if needed, else reclaiming a prefetch
  int32_t take_host();                     // a free host block, evicting the oldest host cached one if needed; -1: none
  void demote(int32_t primary_block, const BlockHash& h);  // an evicted prefix block into the host cache
  Status promote_host_hits(std::span<const KvStepEntry> entries, const std::vector<PrefixMatch>& matches);
  std::unordered_map<SeqId, Prefetch> claim_prefetches(std::span<const KvStepEntry> entries);
  void settle();                           // waits for the copy thread and drops failed prefetches
  void release_prefetch(SeqId seq);        // its reserved blocks go back to the free list (wasted)
  void use_cached(int32_t block);          // one more reference to a cached block
  void release_primary(int32_t block);     // one reference less; an unused cached block joins the LRU list
  void release_table(SeqKv& s);            // releases in reverse, so a prefix's tail is evicted before its head
  void release_behind_window(SeqKv& s);    // with config_.window: the blocks no later query can see
  void copy_to_host_tier(int32_t primary_block, int32_t host_block);      // sealed when encrypting
  Status copy_from_host_tier(int32_t host_block, int32_t primary_block);  // verified when encrypting

  Backend* backend_;
  KvCacheConfig config_;
  KvCache primary_;
  std::optional<KvCache> host_;
  std::optional<HostTierCipher> cipher_;  // with encrypt_host_tier and a host tier
  PrefixCache cache_;
  std::optional<PrefixCache> host_cache_;  // with a host tier
  std::unordered_map<SeqId, SeqKv> seqs_;
  std::vector<Undo> txn_;
  bool in_txn_ = false;
  std::unordered_map<SeqId, Prefetch> prefetched_;
  std::vector<SeqId> prefetch_order_;  // reservation order: the last is reclaimed first
  int64_t reserved_ = 0;               // primary blocks in prefetched_
  std::vector<SeqId> copying_;         // the sequences the copy thread is filling
  std::vector<uint8_t> copy_ok_;       // written by the copy thread, one per copying_
  bool copy_busy_ = false;
  KvCacheStats counts_;                // the counters among the stats
  CopyWorker worker_;                  // last: destroyed (joined) before what its job reads
};

}  // namespace th
