// libFuzzer target for the audit log's reader and verifier
// (scan_audit_file, verify_audit_log). The input is a log file; it is
// verified alone, and a fixed valid log is verified against it as the
// external checkpoint file. Whatever the bytes: no crash, a failure is one
// line, a scan is self-consistent, and a log that verifies re-encodes to
// exactly its own bytes (one encoding per entry, so a leaf hash means one thing).
#include <cstdio>
#include <cstdlib>
#include <span>

#include "audit_log_fuzz_util.h"
#include "audit/audit_verify.h"

namespace {

using namespace th;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "audit_log_fuzz: %s\n", what);
  std::abort();
}

void check_scan(const audit::AuditFileScan& s, size_t size) {
  if (s.good_size > size) die("good_size past the end");
  if (s.torn && s.corrupt) die("both torn and corrupt");
  uint64_t last = 0;
  for (const audit::AuditRecordView& r : s.records) {
    if (r.offset < last || r.offset + audit::kAuditRecordOverhead + r.payload.size() > s.good_size)
      die("record out of order or past good_size");
    last = r.offset + 1;
  }
  if (!s.torn && !s.corrupt && s.header && s.good_size != size) die("clean scan that stops short");
}

void check_report(const audit::AuditVerifyReport& r) {
  if (r.ok) return;
  if (r.reason.empty() || r.reason.find('\n') != std::string::npos) die("reason is not one line");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  const audit::Ed25519PublicKey& key = th::fuzz::audit_fuzz_key().public_key();
  const audit::AuditFileScan scan = audit::scan_audit_file(bytes);
  check_scan(scan, size);
  const audit::AuditVerifyReport r = audit::verify_audit_log(scan, key);
  check_report(r);
  if (r.ok) {
    uint64_t entries = 0;
    std::vector<uint8_t> again(bytes.begin(), bytes.begin() + static_cast<long>(scan.records.empty() ? scan.good_size : scan.records.front().offset));
    for (const audit::AuditRecordView& rec : scan.records) {
      if (rec.type == audit::AuditRecordType::kEntry) {
        ++entries;
        th::Result<audit::LoggedEntry> e = audit::decode_entry(rec.payload);
        if (!e.ok()) die("a verified entry does not decode");
        const std::vector<uint8_t> enc = audit::encode_entry(*e);
        if (!std::equal(enc.begin(), enc.end(), rec.payload.begin(), rec.payload.end()))
          die("an entry has two encodings");
      }
      const std::vector<uint8_t> f = audit::frame_record(rec.type, rec.payload);
      again.insert(again.end(), f.begin(), f.end());
    }
    if (entries != r.entries || r.tree.size() != entries) die("entry count differs");
    if (r.last_checkpoint && r.last_checkpoint->tree_size > entries) die("checkpoint beyond the entries");
    if (!std::equal(again.begin(), again.end(), bytes.begin(), bytes.end())) die("re-framing differs");
  }
  // The input as the external checkpoint file of a fixed, valid log.
  static const std::vector<uint8_t> fixed = th::fuzz::build_audit_log(9, 4);
  static const audit::AuditFileScan fixed_scan = audit::scan_audit_file(fixed);
  audit::AuditVerifyOptions o;
  o.external = &scan;
  const audit::AuditVerifyReport x = audit::verify_audit_log(fixed_scan, key, o);
  check_report(x);
  if (x.ok && x.entries != 9) die("fixed log miscounted");
  // Allowing a torn tail never makes a corrupt file pass.
  audit::AuditVerifyOptions torn_ok;
  torn_ok.allow_torn_tail = true;
  const audit::AuditVerifyReport t = audit::verify_audit_log(scan, key, torn_ok);
  check_report(t);
  if (t.ok && scan.corrupt) die("a corrupt file verified");
  return 0;
}
