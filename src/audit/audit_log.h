// The tamper-evident audit log: one entry per request appended to a file,
// the entries the leaves of an RFC 6962 Merkle tree, signed checkpoints
// (tree size, root, time; Ed25519) written into the same file every N
// entries, every T seconds and on close, and optionally appended to a second
// file the server does not otherwise touch (a copy to keep elsewhere). The
// format is in audit_record.h and docs/CONVENTIONS.md; `tokenhive audit
// verify` checks a file.
//
// Durability: entries are written (one pwrite each) but synced only with a
// checkpoint (write + fdatasync), so a crash loses at most the entries since
// the last checkpoint, and may leave a torn last record; open() drops that
// (and says so in recovery()), never keeps it. open() verifies the whole
// file first and refuses to extend a log that does not verify: signing a
// checkpoint over tampered entries would vouch for them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "base/status.h"
#include "base/unique_fd.h"
#include "audit/audit_record.h"
#include "audit/ed25519.h"
#include "audit/merkle.h"

namespace th::audit {

struct AuditLogOptions {
  uint64_t checkpoint_every_entries = 1000;  // 0: not by count
  double checkpoint_every_seconds = 60;      // 0: not by time (new entries only)
  std::string checkpoint_copy_path;          // empty: none (`--audit-checkpoint-copy FILE`)
};

/// @brief What open() found and did.
struct AuditOpenReport {
  bool created = false;               // a new log (file absent or empty)
  uint64_t entries = 0;               // entries already in the log
  uint64_t checkpoints = 0;
  std::optional<AuditScanProblem> dropped_tail;  // a torn last record, truncated away
  uint64_t dropped_bytes = 0;
  std::optional<AuditScanProblem> dropped_copy_tail;  // the same for the checkpoint copy
};

class AuditLog {
 public:
  /// @brief Opens (or creates) the log at `path` for appending, signing with
  /// `key`. Fails when the file is not an audit log, does not verify, was
  /// signed by another key, or is behind the checkpoint copy (rolled back).
  static Result<std::unique_ptr<AuditLog>> open(const std::string& path, Ed25519PrivateKey key,
                                                AuditLogOptions options = {});
  ~AuditLog();  // close(), errors ignored: call close() to see them
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  /// @brief Appends one entry; returns its index. Thread-safe. Does not sync.
  Result<uint64_t> append(const AuditEntry& entry);
  /// @brief Signs and writes a checkpoint of every entry so far (nothing when
  /// the last checkpoint already covers them), fdatasyncs, then appends it to
  /// the copy and syncs that. Thread-safe.
  Status checkpoint();
  /// @brief Final checkpoint, stops the timer thread, closes the files.
  /// Appends after it fail.
  Status close();

  const AuditOpenReport& recovery() const { return report_; }
  uint64_t size() const;               // entries
  uint64_t checkpointed_size() const;  // entries the last checkpoint covers
  const AuditHeader& header() const { return header_; }

 private:
  AuditLog(std::string path, Ed25519PrivateKey key, AuditLogOptions options);
  Status write_at_end(std::span<const uint8_t> bytes);  // mu_ held
  void timer_loop();

  const std::string path_;
  const Ed25519PrivateKey key_;
  const AuditLogOptions options_;
  AuditHeader header_;
  AuditOpenReport report_;
  UniqueFd fd_, copy_fd_;
  uint64_t copy_size_ = 0;

  mutable std::mutex mu_;  // the file's end, the tree
  uint64_t file_size_ = 0;
  MerkleFrontier frontier_;
  Hash last_leaf_{};
  uint64_t checkpointed_ = 0;
  bool have_checkpoint_ = false;
  bool opened_ = false;  // open() finished: until then close() must write nothing
  bool closed_ = false;
  std::string broken_;  // a failed write or sync: every later call fails with it
  std::chrono::steady_clock::time_point last_checkpoint_time_;

  std::mutex checkpoint_mu_;  // one checkpoint at a time, in order, log then copy
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread timer_;
};

}  // namespace th::audit
