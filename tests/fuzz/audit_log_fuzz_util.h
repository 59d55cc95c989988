// Builds audit log files in memory for audit_log_fuzz and its seed corpus:
// one fixed key and log id, so that seeds, the target and its fixed log agree.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "audit/audit_record.h"
#include "audit/ed25519.h"
#include "audit/merkle.h"

namespace th::fuzz {

inline const audit::Ed25519PrivateKey& audit_fuzz_key() {
  static const audit::Ed25519PrivateKey key = [] {
    std::array<uint8_t, 32> seed{};
    seed.fill(7);
    return *audit::Ed25519PrivateKey::from_seed(seed);
  }();
  return key;
}

inline audit::AuditLogId audit_fuzz_log_id() {
  audit::AuditLogId id{};
  id.fill(0x11);
  return id;
}

/// @brief A valid log of n entries with a checkpoint after every `every`
/// (and at the end); role kCheckpointCopy gives the copy (checkpoints only).
inline std::vector<uint8_t> build_audit_log(uint64_t n, uint64_t every,
                                            audit::AuditFileRole role = audit::AuditFileRole::kLog) {
  std::vector<uint8_t> out(audit::kAuditMagic.begin(), audit::kAuditMagic.end());
  auto put = [&](audit::AuditRecordType t, const std::vector<uint8_t>& payload) {
    const std::vector<uint8_t> rec = audit::frame_record(t, payload);
    out.insert(out.end(), rec.begin(), rec.end());
  };
  audit::AuditHeader h;
  h.log_id = audit_fuzz_log_id();
  h.public_key = audit_fuzz_key().public_key().raw();
  h.created_unix_us = 1700000000000000;
  h.role = role;
  put(audit::AuditRecordType::kHeader, audit::encode_header(h));
  audit::MerkleFrontier tree;
  audit::Hash prev{};
  auto checkpoint = [&] {
    audit::AuditCheckpoint c;
    c.tree_size = tree.size();
    c.root = tree.root();
    c.time_unix_us = 1700000000000000 + static_cast<int64_t>(tree.size());
    c.signature = audit_fuzz_key().sign(audit::checkpoint_signed_bytes(h.log_id, c));
    put(audit::AuditRecordType::kCheckpoint, audit::encode_checkpoint(c));
  };
  for (uint64_t i = 0; i < n; ++i) {
    audit::AuditEntry e;
    e.time = audit::from_unix_us(1700000000000000 + static_cast<int64_t>(i));
    e.request_id = "r" + std::to_string(i);
    e.tenant = "t";
    e.key_id = audit::audit_key_id("k");
    e.route = "/v1/completions";
    e.model = "m";
    e.status = 200;
    e.outcome = "stop";
    e.prompt_tokens = i;
    e.completion_tokens = 2 * i;
    const std::vector<uint8_t> payload = audit::encode_entry(audit::LoggedEntry{i, prev, e});
    prev = audit::merkle_leaf_hash(payload);
    tree.append(prev);
    if (role == audit::AuditFileRole::kLog) put(audit::AuditRecordType::kEntry, payload);
    if (every && (i + 1) % every == 0) checkpoint();
  }
  if (!every || n % every != 0 || n == 0) checkpoint();
  return out;
}

}  // namespace th::fuzz
