// `tokenhive audit keygen` and `tokenhive audit verify` as a user runs them,
// against logs written by AuditLog and then tampered with the ways an
// attacker with write access to the file would: each tamper must fail
// verification (exit 1, one line) naming the first bad entry.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "run_process.h"
#include "audit/audit_log.h"
#include "test_util.h"

namespace th {
namespace {

using namespace th::audit;
using Bytes = std::vector<uint8_t>;
using test::ProcessResult;
using test::run_process;

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

AuditEntry make_entry(uint64_t i) {
  AuditEntry e;
  e.time = from_unix_us(1700000000000000 + static_cast<int64_t>(i) * 1000);
  e.request_id = "req-" + std::to_string(i);
  e.tenant = "acme";
  e.key_id = audit_key_id("sk-key");
  e.route = "/v1/completions";
  e.model = "stories";
  e.status = 200;
  e.outcome = "length";
  e.prompt_tokens = i;
  e.completion_tokens = 16;
  e.latency_us = 5000 + i;
  e.prompt_sha256 = audit_text_digest("p" + std::to_string(i));
  e.output_sha256 = audit_text_digest("o" + std::to_string(i));
  return e;
}

// A file's records, editable, and written back with fresh framing (what an
// attacker who knows the format does: CRCs are no protection).
struct Records {
  Bytes head;  // magic and header record
  std::vector<std::pair<AuditRecordType, Bytes>> recs;

  static Records read(const std::string& path) {
    const Bytes b = read_bytes(path);
    const AuditFileScan s = scan_audit_file(b);
    EXPECT_FALSE(s.torn || s.corrupt);
    Records r;
    r.head.assign(b.begin(), b.begin() + static_cast<long>(s.records.front().offset));
    for (const AuditRecordView& v : s.records) r.recs.push_back({v.type, Bytes(v.payload.begin(), v.payload.end())});
    return r;
  }
  void write(const std::string& path) const {
    Bytes b = head;
    for (const auto& [t, p] : recs) {
      const Bytes f = frame_record(t, p);
      b.insert(b.end(), f.begin(), f.end());
    }
    write_bytes(path, b);
  }
  // Position in recs of entry k.
  size_t entry_pos(uint64_t k) const {
    uint64_t seen = 0;
    for (size_t i = 0; i < recs.size(); ++i)
      if (recs[i].first == AuditRecordType::kEntry && seen++ == k) return i;
    ADD_FAILURE() << "no entry " << k;
    return 0;
  }
  LoggedEntry entry(uint64_t k) const { return *decode_entry(recs[entry_pos(k)].second); }
  void set_entry(uint64_t k, const LoggedEntry& e) { recs[entry_pos(k)].second = encode_entry(e); }
};

class AuditCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("audit_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    ProcessResult r = run_process({test::binary_path(), "audit", "keygen", "--out", path("signer")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    key_ = std::make_unique<Ed25519PrivateKey>(*Ed25519PrivateKey::load(path("signer.key")));
    log_ = path("audit.log");
    copy_ = path("audit.checkpoints");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // n entries, a checkpoint after every `every` (and on close), copied to copy_.
  void write_log(uint64_t from, uint64_t to, uint64_t every) {
    AuditLogOptions o;
    o.checkpoint_every_entries = 0;
    o.checkpoint_every_seconds = 0;
    o.checkpoint_copy_path = copy_;
    auto log = AuditLog::open(log_, *key_, o);
    ASSERT_TRUE(log.ok()) << log.message();
    for (uint64_t i = from; i < to; ++i) {
      ASSERT_EQ(*(*log)->append(make_entry(i)), i);
      if ((i + 1) % every == 0) {
        ASSERT_TRUE((*log)->checkpoint().ok());
      }
    }
    ASSERT_TRUE((*log)->close().ok());
  }

  ProcessResult verify(bool with_copy = false, const std::string& pub = "") {
    std::vector<std::string> argv = {test::binary_path(), "audit", "verify", log_, "--pubkey",
                                     pub.empty() ? path("signer.pub") : pub};
    if (with_copy) {
      argv.push_back("--checkpoint");
      argv.push_back(copy_);
    }
    return run_process(argv);
  }

  // Exit 1, one line on stderr, naming `index` as the first bad entry.
  void expect_caught(const ProcessResult& r, uint64_t index, const std::string& why) {
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("FAILED at entry " + std::to_string(index) + ":"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }

  std::filesystem::path dir_;
  std::unique_ptr<Ed25519PrivateKey> key_;
  std::string log_, copy_;
};

TEST_F(AuditCli, KeygenWritesAPrivateKeyOnlyItsOwnerReads) {
  struct stat st {};
  ASSERT_EQ(::stat(path("signer.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(path("signer.pub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_TRUE(Ed25519PublicKey::load(path("signer.pub")).ok());
  ProcessResult again = run_process({test::binary_path(), "audit", "keygen", "--out", path("signer")});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("exists"), std::string::npos) << again.err;
  ProcessResult bad = run_process({test::binary_path(), "audit", "keygen"});
  EXPECT_EQ(bad.exit_code, 2);
}

TEST_F(AuditCli, AnIntactLogVerifies) {
  write_log(0, 25, 10);
  ProcessResult r = verify(true);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ok: 25 entries, 3 checkpoints (last at size 25"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 checkpoints in"), std::string::npos) << r.out;
}

TEST_F(AuditCli, AnotherPublicKeyFails) {
  write_log(0, 3, 10);
  ASSERT_EQ(run_process({test::binary_path(), "audit", "keygen", "--out", path("other")}).exit_code, 0);
  ProcessResult r = verify(false, path("other.pub"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("signed by another key"), std::string::npos) << r.err;
}

TEST_F(AuditCli, AFlippedByteIsCaughtAtItsEntry) {
  write_log(0, 30, 10);
  Bytes b = read_bytes(log_);
  const AuditFileScan s = scan_audit_file(b);
  const AuditRecordView& rec = s.records[13 + 1];  // entry 13 (a checkpoint precedes it)
  b[rec.offset + 30] ^= 0x01;
  write_bytes(log_, b);
  expect_caught(verify(), 13, "fails its CRC");
}

TEST_F(AuditCli, AnEditedEntryIsCaughtAtItsEntry) {
  write_log(0, 30, 10);
  Records r = Records::read(log_);
  LoggedEntry e = r.entry(13);
  e.entry.completion_tokens = 1;  // bill less
  r.set_entry(13, e);
  r.write(log_);
  expect_caught(verify(), 13, "entry 13 was changed");
}

TEST_F(AuditCli, AnEditWithTheChainRewrittenIsCaughtByTheSignedRoot) {
  write_log(0, 30, 10);
  Records r = Records::read(log_);
  LoggedEntry e = r.entry(13);
  e.entry.tenant = "mallory";
  r.set_entry(13, e);
  for (uint64_t k = 14; k < 30; ++k) {  // relink everything after it
    LoggedEntry next = r.entry(k);
    next.prev_leaf = merkle_leaf_hash(r.recs[r.entry_pos(k - 1)].second);
    r.set_entry(k, next);
  }
  r.write(log_);
  // Entries 0..9 are vouched for by the checkpoint at 10; the change is in 10..19.
  expect_caught(verify(), 10, "do not match the signed root at size 20");
}

TEST_F(AuditCli, ADeletedEntryIsCaught) {
  write_log(0, 30, 10);
  Records r = Records::read(log_);
  r.recs.erase(r.recs.begin() + static_cast<long>(r.entry_pos(13)));
  r.write(log_);
  expect_caught(verify(), 13, "entries removed or reordered");
}

TEST_F(AuditCli, AnInsertedEntryIsCaught) {
  write_log(0, 30, 10);
  Records r = Records::read(log_);
  // A forged entry that claims position 13 and links to entry 12, as a real one would.
  LoggedEntry forged{13, merkle_leaf_hash(r.recs[r.entry_pos(12)].second), make_entry(999)};
  r.recs.insert(r.recs.begin() + static_cast<long>(r.entry_pos(13)), {AuditRecordType::kEntry, encode_entry(forged)});
  r.write(log_);
  expect_caught(verify(), 13, "inserted or moved");
}

TEST_F(AuditCli, AReplayedEntryIsCaughtWhereItWasInserted) {
  write_log(0, 30, 10);
  Records r = Records::read(log_);
  const auto copy_of_3 = r.recs[r.entry_pos(3)];
  r.recs.insert(r.recs.begin() + static_cast<long>(r.entry_pos(17)), copy_of_3);
  r.write(log_);
  expect_caught(verify(), 17, "inserted or moved");
}

TEST_F(AuditCli, SwappedEntriesAreCaught) {
  write_log(0, 30, 10);
  Records r = Records::read(log_);
  std::swap(r.recs[r.entry_pos(13)], r.recs[r.entry_pos(14)]);
  r.write(log_);
  expect_caught(verify(), 13, "entries removed or reordered");
}

TEST_F(AuditCli, ACutFileIsCaught) {
  write_log(0, 30, 10);
  Bytes b = read_bytes(log_);
  const AuditFileScan s = scan_audit_file(b);
  b.resize(s.records[s.records.size() - 2].offset + 7);  // inside entry 29
  write_bytes(log_, b);
  expect_caught(verify(), 29, "torn last record");
}

TEST_F(AuditCli, TruncationBehindACheckpointIsCaughtByTheCopy) {
  write_log(0, 30, 10);
  Bytes b = read_bytes(log_);
  const AuditFileScan s = scan_audit_file(b);
  // Cut cleanly after entry 24: the checkpoint at 30 goes with it, so the
  // file alone looks whole; the copy remembers 30.
  b.resize(s.records[24 + 2 + 1].offset);  // records: e0..9 C e10..19 C e20..
  write_bytes(log_, b);
  ASSERT_EQ(verify().exit_code, 0);  // undetectable without an outside checkpoint
  expect_caught(verify(true), 25, "truncated or rolled back");
}

TEST_F(AuditCli, RollbackToAnOlderCheckpointIsCaughtByTheCopy) {
  write_log(0, 10, 10);
  const Bytes at10 = read_bytes(log_);
  write_log(10, 30, 10);
  write_bytes(log_, at10);
  ASSERT_EQ(verify().exit_code, 0);  // an older log is a valid log
  expect_caught(verify(true), 10, "truncated or rolled back");
}

TEST_F(AuditCli, AForgedCheckpointSignatureIsCaught) {
  write_log(0, 30, 10);
  Records r = Records::read(log_);
  const size_t second_checkpoint = r.entry_pos(19) + 1;
  ASSERT_EQ(r.recs[second_checkpoint].first, AuditRecordType::kCheckpoint);
  AuditCheckpoint c = *decode_checkpoint(r.recs[second_checkpoint].second);
  c.signature[7] ^= 0x20;
  r.recs[second_checkpoint].second = encode_checkpoint(c);
  r.write(log_);
  expect_caught(verify(), 10, "signature does not verify");
}

TEST_F(AuditCli, ACheckpointReSignedWithAnotherKeyIsCaught) {
  write_log(0, 30, 10);
  // The attacker changes entry 25, relinks, and signs a new root with a key of his own.
  Records r = Records::read(log_);
  LoggedEntry e = r.entry(25);
  e.entry.outcome = "error";
  r.set_entry(25, e);
  for (uint64_t k = 26; k < 30; ++k) {
    LoggedEntry next = r.entry(k);
    next.prev_leaf = merkle_leaf_hash(r.recs[r.entry_pos(k - 1)].second);
    r.set_entry(k, next);
  }
  MerkleTree tree;
  for (uint64_t k = 0; k < 30; ++k) tree.append(merkle_leaf_hash(r.recs[r.entry_pos(k)].second));
  const size_t last = r.recs.size() - 1;
  AuditCheckpoint c = *decode_checkpoint(r.recs[last].second);
  c.root = tree.root(30);
  const AuditHeader h = *scan_audit_file(read_bytes(log_)).header;
  std::array<uint8_t, 32> seed{};
  seed.fill(0x66);
  c.signature = Ed25519PrivateKey::from_seed(seed)->sign(checkpoint_signed_bytes(h.log_id, c));
  r.recs[last].second = encode_checkpoint(c);
  r.write(log_);
  expect_caught(verify(), 20, "signature does not verify");
}

TEST_F(AuditCli, ACheckpointFileOfAnotherLogIsRefused) {
  write_log(0, 5, 10);
  std::filesystem::rename(copy_, path("old.checkpoints"));
  std::filesystem::remove(log_);
  write_log(0, 5, 10);  // a new log, new id
  ProcessResult r = run_process({test::binary_path(), "audit", "verify", log_, "--pubkey", path("signer.pub"),
                                 "--checkpoint", path("old.checkpoints")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("belongs to another log"), std::string::npos) << r.err;
}

TEST_F(AuditCli, MissingFilesAreOneLineErrors) {
  ProcessResult r = run_process({test::binary_path(), "audit", "verify", path("nope.log"), "--pubkey",
                                 path("signer.pub")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  ProcessResult no_key = run_process({test::binary_path(), "audit", "verify", path("nope.log")});
  EXPECT_EQ(no_key.exit_code, 2);
}

}  // namespace
}  // namespace th
