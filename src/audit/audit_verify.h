// Verifies an audit log against its signing key: every record's framing,
// every entry's position and link to the entry before it, every checkpoint's
// signature and root (recomputed from the entries), consistency between
// successive checkpoints, and optionally the checkpoints of an external file
// (the copy the server appends to, or any older copy of the log) so that a
// truncation or rollback behind a known checkpoint shows. The first problem
// in file order is reported with the first entry it puts in doubt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "audit/audit_record.h"
#include "audit/ed25519.h"
#include "audit/merkle.h"

namespace th::audit {

struct AuditVerifyReport {
  bool ok = false;
  std::string reason;  // one line, when !ok
  // The first entry the problem puts in doubt: exact for a record that fails
  // its framing, an entry out of place or an entry changed without rewriting
  // the entries after it; for a signed root that does not match, the first
  // entry after the last checkpoint that did (the change is somewhere from
  // there to that checkpoint's size). Absent when no entry is in doubt.
  std::optional<uint64_t> first_bad_index;

  std::optional<AuditHeader> header;
  uint64_t entries = 0;              // entries read (all of them when ok)
  uint64_t checkpoints = 0;          // in the log, verified
  uint64_t external_checkpoints = 0; // in the external file, verified
  std::optional<AuditCheckpoint> last_checkpoint;  // the log's last verified checkpoint
  MerkleTree tree;                   // the leaves read
  std::optional<AuditScanProblem> torn;  // a torn tail (only ok with allow_torn_tail)
};

struct AuditVerifyOptions {
  const AuditFileScan* external = nullptr;  // another file's checkpoints to hold the log to
  bool allow_torn_tail = false;             // the writer's open: the tail is about to be dropped
};

AuditVerifyReport verify_audit_log(const AuditFileScan& log, const Ed25519PublicKey& key,
                                   const AuditVerifyOptions& options = {});

}  // namespace th::audit
