// The audit log's file format: what an entry and a checkpoint hold, their
// byte encodings (the entry bytes are the Merkle leaves), and the record
// framing that makes a torn last write detectable. docs/CONVENTIONS.md
// ("Audit log") is the specification; this file is its implementation.
//
//   file    = "THAUDIT1" record*            (the first record is the header)
//   record  = type:u8 length:u32 crc32c(type,length):u32 payload crc32c(payload):u32
//   type    = 'H' header | 'E' entry | 'C' checkpoint
//
// Integers are little-endian; strings are u16 length + bytes.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "audit/ed25519.h"
#include "audit/merkle.h"

namespace th::audit {

inline constexpr std::string_view kAuditMagic = "THAUDIT1";
inline constexpr size_t kAuditRecordOverhead = 13;         // type, length, two CRCs
inline constexpr uint32_t kAuditMaxPayload = 64 * 1024;    // an entry is far smaller
inline constexpr size_t kAuditMaxString = 4096;            // per entry field
inline constexpr std::string_view kCheckpointSigningContext = "tokenhive-audit-checkpoint-v1";

enum class AuditRecordType : uint8_t { kHeader = 'H', kEntry = 'E', kCheckpoint = 'C' };
enum class AuditFileRole : uint8_t { kLog = 0, kCheckpointCopy = 1 };

using AuditLogId = std::array<uint8_t, 16>;

/// @brief One request, as the service knows it when the request ends. Never
/// text: prompt and output are SHA-256 digests; the key is its key id.
struct AuditEntry {
  std::chrono::system_clock::time_point time;  // when the request finished
  std::string request_id;
  std::string tenant;      // empty: no key
  std::string key_id;      // audit_key_id(key); empty: no key
  std::string route;       // "/v1/chat/completions"
  std::string model;       // the served model's name
  int32_t priority = 0;
  int32_t status = 0;      // HTTP status sent
  std::string outcome;     // "stop", "length", "cancelled", "error", "rate_limited", ...
  uint64_t prompt_tokens = 0;
  uint64_t completion_tokens = 0;
  uint64_t latency_us = 0;  // arrival to last byte
  Hash prompt_sha256{};     // audit_text_digest(prompt as the model saw it)
  Hash output_sha256{};     // audit_text_digest(the choices' texts)

  bool operator==(const AuditEntry&) const = default;
};

/// @brief An entry as the log stores it: its position and the leaf hash of
/// the entry before it (zeros for the first), so that an edit, removal or
/// insertion shows at the entry where it happened.
struct LoggedEntry {
  uint64_t index = 0;
  Hash prev_leaf{};
  AuditEntry entry;

  bool operator==(const LoggedEntry&) const = default;
};

struct AuditHeader {
  AuditLogId log_id{};              // random, shared by the log and its checkpoint copy
  Ed25519RawPublicKey public_key{};  // the key that signs the checkpoints
  int64_t created_unix_us = 0;
  AuditFileRole role = AuditFileRole::kLog;
};

struct AuditCheckpoint {
  uint64_t tree_size = 0;
  Hash root{};
  int64_t time_unix_us = 0;
  Ed25519Signature signature{};
};

/// @brief The first 8 hex digits of SHA-256(key): names a key without revealing it.
std::string audit_key_id(std::string_view api_key);
/// @brief SHA-256 of a text.
Hash audit_text_digest(std::string_view text);
/// @brief SHA-256 over several texts (n choices), each preceded by its length
/// as a u64, so that no two lists of texts share a digest.
Hash audit_texts_digest(std::span<const std::string> texts);

uint32_t crc32c(std::span<const uint8_t> data, uint32_t crc = 0);

std::vector<uint8_t> encode_entry(const LoggedEntry& e);
/// @brief Strict: the version, every length in bounds, no trailing bytes.
Result<LoggedEntry> decode_entry(std::span<const uint8_t> bytes);
std::vector<uint8_t> encode_header(const AuditHeader& h);
Result<AuditHeader> decode_header(std::span<const uint8_t> bytes);
std::vector<uint8_t> encode_checkpoint(const AuditCheckpoint& c);
Result<AuditCheckpoint> decode_checkpoint(std::span<const uint8_t> bytes);
/// @brief The bytes a checkpoint's signature covers: the context string, the
/// log id, tree size, root and time.
std::vector<uint8_t> checkpoint_signed_bytes(const AuditLogId& log_id, const AuditCheckpoint& c);

/// @brief The framed record: type, length, CRCs around `payload`.
std::vector<uint8_t> frame_record(AuditRecordType type, std::span<const uint8_t> payload);
/// @brief An entry fails the checks encode_entry cannot express (string lengths).
Status check_entry_fits(const AuditEntry& e);

/// @brief One record found by scan_audit_file; `payload` points into the scanned bytes.
struct AuditRecordView {
  AuditRecordType type;
  uint64_t offset;  // of the record's first byte
  std::span<const uint8_t> payload;
};

struct AuditScanProblem {
  uint64_t offset = 0;  // where the bad record starts
  std::string reason;
};

/// @brief A file's records as framed. `torn`: the last record is incomplete
/// (a crash mid-write: the bytes from torn->offset on are not a record and
/// are dropped when the log is opened). `corrupt`: a record that is not the
/// last fails its checks, or the file is not an audit log; the records
/// before it are still listed.
struct AuditFileScan {
  std::optional<AuditHeader> header;  // absent when the file is empty or torn before it
  std::vector<AuditRecordView> records;  // after the header
  uint64_t good_size = 0;  // bytes up to the end of the last whole record
  std::optional<AuditScanProblem> torn;
  std::optional<AuditScanProblem> corrupt;
};

AuditFileScan scan_audit_file(std::span<const uint8_t> bytes);

int64_t to_unix_us(std::chrono::system_clock::time_point t);
std::chrono::system_clock::time_point from_unix_us(int64_t us);

}  // namespace th::audit
