#include "audit/audit_verify.h"

#include <algorithm>

namespace th::audit {
namespace {

struct Fail {
  std::string reason;
  std::optional<uint64_t> first_bad;
};

std::string short_hex(std::span<const uint8_t> b) { return to_hex(b).substr(0, 16); }

// The external file's checkpoints: signed by the key, of this log.
std::optional<Fail> check_external(const AuditFileScan& ext, const AuditHeader& header, const Ed25519PublicKey& key,
                                   std::vector<AuditCheckpoint>& out) {
  if (ext.corrupt) return Fail{cat("checkpoint file: byte ", ext.corrupt->offset, ": ", ext.corrupt->reason), {}};
  if (!ext.header) return Fail{"checkpoint file: no header record", {}};
  if (ext.header->log_id != header.log_id)
    return Fail{cat("checkpoint file belongs to another log (id ", short_hex(ext.header->log_id), ", not ",
                    short_hex(header.log_id), ")"),
                {}};
  // A torn tail in the copy is a crash of the writer, and it verifies nothing: ignored.
  for (const AuditRecordView& r : ext.records) {
    if (r.type != AuditRecordType::kCheckpoint) continue;
    Result<AuditCheckpoint> c = decode_checkpoint(r.payload);
    if (!c.ok()) return Fail{cat("checkpoint file: byte ", r.offset, ": ", c.message()), {}};
    if (!key.verify(checkpoint_signed_bytes(header.log_id, *c), c->signature))
      return Fail{cat("checkpoint file: checkpoint at byte ", r.offset, " (size ", c->tree_size,
                      "): signature does not verify"),
                  {}};
    out.push_back(*c);
  }
  return std::nullopt;
}

}  // namespace

AuditVerifyReport verify_audit_log(const AuditFileScan& log, const Ed25519PublicKey& key,
                                   const AuditVerifyOptions& options) {
  AuditVerifyReport rep;
  rep.header = log.header;
  rep.torn = log.torn;
  auto fail = [&](Fail f) {
    rep.ok = false;
    rep.reason = std::move(f.reason);
    rep.first_bad_index = f.first_bad;
    return std::move(rep);
  };

  if (!log.header) {
    if (log.corrupt) return fail({cat("byte ", log.corrupt->offset, ": ", log.corrupt->reason), {}});
    if (log.torn) return fail({cat("torn before its header record (", log.torn->reason, ")"), {}});
    return fail({"empty file: no header record", {}});
  }
  const AuditHeader& header = *log.header;
  if (header.role != AuditFileRole::kLog) return fail({"this is a checkpoint copy, not a log", {}});
  if (header.public_key != key.raw())
    return fail({cat("the log is signed by another key (", short_hex(header.public_key), "..., not ",
                     short_hex(key.raw()), "...)"),
                 {}});

  std::vector<AuditCheckpoint> external;
  if (options.external)
    if (std::optional<Fail> f = check_external(*options.external, header, key, external)) return fail(*f);
  rep.external_checkpoints = external.size();

  MerkleTree& tree = rep.tree;
  uint64_t proven = 0;  // entries [0, proven) are covered by a verified checkpoint
  std::optional<AuditCheckpoint> prev;
  for (const AuditRecordView& r : log.records) {
    const uint64_t p = tree.size();
    if (r.type == AuditRecordType::kEntry) {
      Result<LoggedEntry> e = decode_entry(r.payload);
      if (!e.ok()) return fail({cat("entry ", p, " (byte ", r.offset, "): ", e.message()), p});
      const uint64_t q = e->index;
      if (q > p)
        return fail({cat("entry at position ", p, " carries index ", q, ": entries removed or reordered"), p});
      if (q < p) {
        // Two neighbours claiming one index: the first of them is the earliest
        // that can be the intruder. Further back, this entry is out of place.
        const uint64_t bad = q + 1 == p ? q : p;
        return fail({cat("entry at position ", p, " carries index ", q, ": an entry was inserted or moved"), bad});
      }
      const Hash expect_prev = p == 0 ? Hash{} : tree.leaf(p - 1);
      if (e->prev_leaf != expect_prev) {
        if (p == 0) return fail({"entry 0 links to a predecessor: entries before it were removed", 0});
        return fail({cat("entry ", p, " does not link to entry ", p - 1, ": entry ", p - 1, " was changed"), p - 1});
      }
      tree.append(merkle_leaf_hash(r.payload));
      continue;
    }
    if (r.type != AuditRecordType::kCheckpoint) return fail({cat("byte ", r.offset, ": unexpected record"), p});
    Result<AuditCheckpoint> c = decode_checkpoint(r.payload);
    if (!c.ok()) return fail({cat("checkpoint at byte ", r.offset, ": ", c.message()), proven});
    if (!key.verify(checkpoint_signed_bytes(header.log_id, *c), c->signature))
      return fail({cat("checkpoint at byte ", r.offset, " (size ", c->tree_size, "): signature does not verify"),
                   proven});
    if (c->tree_size != p)
      return fail({cat("checkpoint at byte ", r.offset, " signs ", c->tree_size, " entries but ", p,
                       " precede it: entries removed or inserted"),
                   std::min(c->tree_size, p)});
    if (c->root != tree.root(p))
      return fail({cat("entries ", proven, "..", p - 1, " do not match the signed root at size ", p,
                       ": an entry in that range was changed"),
                   proven});
    if (prev) {
      if (c->time_unix_us < prev->time_unix_us)
        return fail({cat("checkpoint at byte ", r.offset, " is older than the one before it"), proven});
      Result<std::vector<Hash>> proof = tree.consistency_proof(prev->tree_size, p);
      if (!proof.ok() || !verify_consistency(prev->tree_size, p, prev->root, c->root, *proof))
        return fail({cat("checkpoints at sizes ", prev->tree_size, " and ", p, " are not consistent"), proven});
    }
    prev = *c;
    proven = p;
    ++rep.checkpoints;
  }
  rep.entries = tree.size();
  rep.last_checkpoint = prev;
  const uint64_t n = tree.size();
  if (log.corrupt)
    return fail({cat("record at byte ", log.corrupt->offset, " (after ", n, " entries): ", log.corrupt->reason), n});
  if (log.torn && !options.allow_torn_tail)
    return fail({cat("torn last record at byte ", log.torn->offset, " (", log.torn->reason,
                     "): a crash mid-write; reopening the log drops it"),
                 n});

  for (const AuditCheckpoint& c : external) {
    if (c.tree_size > n)
      return fail({cat("the log has ", n, " entries but a signed checkpoint in the checkpoint file has ",
                       c.tree_size, ": the log was truncated or rolled back"),
                   n});
    if (c.root != tree.root(c.tree_size))
      return fail({cat("entries up to ", c.tree_size, " do not match the checkpoint file's signed root"), 0});
    if (prev && prev->tree_size >= c.tree_size) {
      Result<std::vector<Hash>> proof = tree.consistency_proof(c.tree_size, prev->tree_size);
      if (!proof.ok() || !verify_consistency(c.tree_size, prev->tree_size, c.root, prev->root, *proof))
        return fail({cat("the checkpoint file's checkpoint at size ", c.tree_size,
                         " is not consistent with the log's at size ", prev->tree_size),
                     0});
    }
  }
  rep.ok = true;
  return rep;
}

}  // namespace th::audit
