// tokenhive audit: the tamper-evident audit log's tools. `keygen` writes the
// Ed25519 key pair that signs checkpoints; `verify` checks a log file (and
// optionally a copy of its checkpoints kept elsewhere) against the public key.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/parse_flags.h"
#include "cli/verbs.h"
#include "audit/audit_verify.h"
#include "audit/ed25519.h"

namespace th::cli {
namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

int keygen(const std::string& prefix) {
  const std::string key_path = prefix + ".key", pub_path = prefix + ".pub";
  for (const std::string& p : {key_path, pub_path})
    if (exists(p)) return fail("audit", p + ": exists; not overwriting a key");
  Result<audit::Ed25519PrivateKey> key = audit::Ed25519PrivateKey::generate();
  if (!key.ok()) return fail("audit", key.message());
  // The public half first: a crash between the two leaves no orphan private key.
  if (Status s = audit::write_new_file(pub_path, key->public_key().pem(), 0644); !s.ok()) return fail("audit", s.message());
  if (Status s = audit::write_new_file(key_path, key->pem(), 0600); !s.ok()) return fail("audit", s.message());
  std::printf("wrote %s (private, mode 0600) and %s (public key %s)\n", key_path.c_str(), pub_path.c_str(),
              audit::to_hex(key->public_key().raw()).c_str());
  return 0;
}

Result<std::vector<uint8_t>> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::errorf(path, ": cannot open");
  std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::errorf(path, ": cannot read");
  return b;
}

int verify(const std::string& file, const std::string& pubkey, const std::string& checkpoint_file) {
  Result<audit::Ed25519PublicKey> key = audit::Ed25519PublicKey::load(pubkey);
  if (!key.ok()) return fail("audit", key.message());
  Result<std::vector<uint8_t>> bytes = read_file(file);
  if (!bytes.ok()) return fail("audit", bytes.message());
  const audit::AuditFileScan scan = audit::scan_audit_file(*bytes);
  std::vector<uint8_t> ext_bytes;
  audit::AuditFileScan ext_scan;
  audit::AuditVerifyOptions options;
  if (!checkpoint_file.empty()) {
    Result<std::vector<uint8_t>> b = read_file(checkpoint_file);
    if (!b.ok()) return fail("audit", b.message());
    ext_bytes = std::move(b).value();
    ext_scan = audit::scan_audit_file(ext_bytes);
    options.external = &ext_scan;
  }
  const audit::AuditVerifyReport r = audit::verify_audit_log(scan, *key, options);
  if (!r.ok) {
    if (r.first_bad_index) return fail("audit", cat(file, ": FAILED at entry ", *r.first_bad_index, ": ", r.reason));
    return fail("audit", cat(file, ": FAILED: ", r.reason));
  }
  std::string last = "no checkpoint yet";
  if (r.last_checkpoint)
    last = cat("last at size ", r.last_checkpoint->tree_size, ", root ", audit::to_hex(r.last_checkpoint->root));
  const uint64_t signed_n = r.last_checkpoint ? r.last_checkpoint->tree_size : 0;
  std::printf("%s: ok: %llu entries, %llu checkpoints (%s)", file.c_str(),
              static_cast<unsigned long long>(r.entries), static_cast<unsigned long long>(r.checkpoints),
              last.c_str());
  if (r.entries > signed_n)
    std::printf(", %llu entries after it not yet signed", static_cast<unsigned long long>(r.entries - signed_n));
  if (!checkpoint_file.empty())
    std::printf("; %llu checkpoints in %s agree", static_cast<unsigned long long>(r.external_checkpoints),
                checkpoint_file.c_str());
  std::printf("\n");
  return 0;
}

}  // namespace

int run_audit(int argc, char** argv) {
  CLI::App app{"The tamper-evident audit log: signing keys and verification.", "tokenhive audit"};
  app.require_subcommand(1);

  std::string prefix;
  CLI::App* kg = app.add_subcommand("keygen", "write an Ed25519 key pair: PREFIX.key (private, 0600) and PREFIX.pub");
  kg->add_option("--out", prefix, "path prefix of the two files")->required();

  std::string file, pubkey, checkpoint_file;
  CLI::App* vf = app.add_subcommand(
      "verify", "check an audit log: every entry, every signed checkpoint; exit 0 when intact, 1 with the first problem");
  vf->add_option("file", file, "the audit log")->required();
  vf->add_option("--pubkey", pubkey, "the signer's public key (PEM, from audit keygen)")->required();
  vf->add_option("--checkpoint", checkpoint_file,
                 "a file of the log's signed checkpoints kept elsewhere (--audit-checkpoint-copy, or an older copy of "
                 "the log): catches truncation and rollback");

  if (std::optional<int> rc = parse_flags(app, "audit", argc, argv)) return *rc;
  if (kg->parsed()) return keygen(prefix);
  return verify(file, pubkey, checkpoint_file);
}

}  // namespace th::cli
