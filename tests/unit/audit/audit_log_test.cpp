// The audit log's format and writer: encodings, framing and torn tails,
// checkpoints, reopening, crash recovery at every byte of the last record,
// refusing to extend a tampered or rolled-back log, concurrent appends.
#include "audit/audit_log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "audit/audit_verify.h"

namespace th::audit {
namespace {

using Bytes = std::vector<uint8_t>;

Ed25519PrivateKey test_key(uint8_t seed = 7) {
  std::array<uint8_t, 32> s{};
  s.fill(seed);
  return *Ed25519PrivateKey::from_seed(s);
}

AuditEntry make_entry(uint64_t i) {
  AuditEntry e;
  e.time = from_unix_us(1700000000000000 + static_cast<int64_t>(i) * 1000);
  e.request_id = "req-" + std::to_string(i);
  e.tenant = i % 2 ? "acme" : "beta";
  e.key_id = audit_key_id("sk-test-key-" + std::to_string(i % 3));
  e.route = "/v1/chat/completions";
  e.model = "tinyllama";
  e.priority = static_cast<int32_t>(i % 3) - 1;
  e.status = 200;
  e.outcome = "stop";
  e.prompt_tokens = 10 + i;
  e.completion_tokens = 20 + i;
  e.latency_us = 1000 * i;
  e.prompt_sha256 = audit_text_digest("prompt " + std::to_string(i));
  e.output_sha256 = audit_text_digest("output " + std::to_string(i));
  return e;
}

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

class AuditLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("audit_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static AuditLogOptions manual() {
    AuditLogOptions o;
    o.checkpoint_every_entries = 0;
    o.checkpoint_every_seconds = 0;
    return o;
  }

  // A log of n entries, a checkpoint after every `every` entries and on close.
  void write_log(const std::string& p, uint64_t n, uint64_t every, AuditLogOptions o = manual()) {
    auto log = AuditLog::open(p, test_key(), o);
    ASSERT_TRUE(log.ok()) << log.message();
    for (uint64_t i = 0; i < n; ++i) {
      ASSERT_EQ(*(*log)->append(make_entry(i)), i);
      if (every && (i + 1) % every == 0) {
        ASSERT_TRUE((*log)->checkpoint().ok());
      }
    }
    ASSERT_TRUE((*log)->close().ok());
  }

  AuditVerifyReport verify_file(const std::string& p, const std::string& copy = "") {
    bytes_ = read_bytes(p);
    scan_ = scan_audit_file(bytes_);
    AuditVerifyOptions o;
    if (!copy.empty()) {
      copy_bytes_ = read_bytes(copy);
      copy_scan_ = scan_audit_file(copy_bytes_);
      o.external = &copy_scan_;
    }
    return verify_audit_log(scan_, test_key().public_key(), o);
  }

  std::filesystem::path dir_;
  Bytes bytes_, copy_bytes_;
  AuditFileScan scan_, copy_scan_;
};

TEST(AuditRecordTest, Crc32cKnownValue) {
  const std::string s = "123456789";
  EXPECT_EQ(crc32c(std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size())), 0xE3069283u);
}

TEST(AuditRecordTest, EntryRoundTripsAndDecodingIsStrict) {
  LoggedEntry le{42, audit_text_digest("prev"), make_entry(42)};
  const Bytes b = encode_entry(le);
  Result<LoggedEntry> back = decode_entry(b);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(*back, le);
  for (size_t cut = 0; cut < b.size(); ++cut)
    EXPECT_FALSE(decode_entry(std::span(b.data(), cut)).ok()) << cut;
  Bytes longer = b;
  longer.push_back(0);
  EXPECT_FALSE(decode_entry(longer).ok());
  Bytes v2 = b;
  v2[0] = 2;
  EXPECT_FALSE(decode_entry(v2).ok());
  Bytes far = b;  // a time system_clock cannot hold (found by audit_log_fuzz)
  for (size_t i = 41; i < 49; ++i) far[i] = 0x7f;
  EXPECT_FALSE(decode_entry(far).ok());
}

TEST(AuditRecordTest, KeyIdIsEightHexOfTheKeysSha256) {
  EXPECT_EQ(audit_key_id("abc"), "ba7816bf");
  const std::vector<std::string> a = {"ab", "c"}, b = {"a", "bc"};
  EXPECT_NE(audit_texts_digest(a), audit_texts_digest(b));
}

TEST(AuditRecordTest, CheckEntryFitsBoundsStrings) {
  AuditEntry e = make_entry(1);
  EXPECT_TRUE(check_entry_fits(e).ok());
  e.model.assign(kAuditMaxString + 1, 'm');
  EXPECT_FALSE(check_entry_fits(e).ok());
}

TEST(AuditRecordTest, ScanSeparatesATornTailFromACorruptRecord) {
  Bytes file(kAuditMagic.begin(), kAuditMagic.end());
  const Bytes h = frame_record(AuditRecordType::kHeader, encode_header(AuditHeader{}));
  const Bytes e1 = frame_record(AuditRecordType::kEntry, encode_entry({0, {}, make_entry(0)}));
  const Bytes e2 = frame_record(AuditRecordType::kEntry, encode_entry({1, {}, make_entry(1)}));
  for (const Bytes* r : {&h, &e1, &e2}) file.insert(file.end(), r->begin(), r->end());
  AuditFileScan s = scan_audit_file(file);
  EXPECT_FALSE(s.torn || s.corrupt);
  EXPECT_EQ(s.records.size(), 2u);

  // A flipped byte in the middle record: corrupt, never skipped.
  const size_t e1_at = kAuditMagic.size() + h.size();
  for (size_t at : {e1_at, e1_at + 3, e1_at + 20, e1_at + e1.size() - 1}) {
    Bytes bad = file;
    bad[at] ^= 0x40;
    s = scan_audit_file(bad);
    ASSERT_TRUE(s.corrupt) << at;
    EXPECT_FALSE(s.torn);
    EXPECT_EQ(s.corrupt->offset, e1_at);
    EXPECT_EQ(s.records.size(), 0u);
  }
  // A length field made huge in the middle is caught by the frame CRC, not read as a torn tail.
  Bytes big = file;
  big[e1_at + 4] = 0x7f;
  s = scan_audit_file(big);
  EXPECT_TRUE(s.corrupt);
  // The same flip in the last record: the file ends there, a torn write.
  Bytes last = file;
  last[file.size() - 2] ^= 1;
  s = scan_audit_file(last);
  ASSERT_TRUE(s.torn);
  EXPECT_EQ(s.torn->offset, file.size() - e2.size());
  // Zeros where the last record should be: blocks allocated, never written.
  Bytes zeros(file.begin(), file.end() - static_cast<long>(e2.size()));
  zeros.resize(file.size(), 0);
  s = scan_audit_file(zeros);
  EXPECT_TRUE(s.torn);
  EXPECT_FALSE(s.corrupt);
  // Not an audit log at all.
  const std::string text = "hello, world\n";
  s = scan_audit_file(Bytes(text.begin(), text.end()));
  EXPECT_TRUE(s.corrupt);
}

TEST_F(AuditLogTest, WritesAndVerifies) {
  const std::string p = path("audit.log");
  write_log(p, 25, 10);
  const AuditVerifyReport r = verify_file(p);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.entries, 25u);
  EXPECT_EQ(r.checkpoints, 3u);  // 10, 20, and 25 on close
  EXPECT_EQ(r.last_checkpoint->tree_size, 25u);
  for (const AuditRecordView& rec : scan_.records)
    if (rec.type == AuditRecordType::kEntry) {
      const LoggedEntry e = *decode_entry(rec.payload);
      EXPECT_EQ(e.entry, make_entry(e.index));
    }
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077 & ~0040, 0u);  // 0640 at most
}

TEST_F(AuditLogTest, ReopenContinuesTheSameTree) {
  const std::string p = path("audit.log");
  write_log(p, 7, 0);
  {
    auto log = AuditLog::open(p, test_key(), manual());
    ASSERT_TRUE(log.ok()) << log.message();
    EXPECT_FALSE((*log)->recovery().created);
    EXPECT_EQ((*log)->recovery().entries, 7u);
    EXPECT_EQ((*log)->size(), 7u);
    EXPECT_EQ(*(*log)->append(make_entry(7)), 7u);
    ASSERT_TRUE((*log)->close().ok());
  }
  const AuditVerifyReport r = verify_file(p);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.entries, 8u);
  EXPECT_EQ(r.checkpoints, 2u);
  // Closing again, or closing with nothing new, adds nothing.
  auto log = AuditLog::open(p, test_key(), manual());
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE((*log)->close().ok());
  EXPECT_EQ(verify_file(p).checkpoints, 2u);
}

TEST_F(AuditLogTest, AnEmptyLogGetsACheckpointOfTheEmptyTree) {
  const std::string p = path("audit.log");
  write_log(p, 0, 0);
  const AuditVerifyReport r = verify_file(p);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.checkpoints, 1u);
  EXPECT_EQ(r.last_checkpoint->root, merkle_empty_root());
}

TEST_F(AuditLogTest, CrashAtEveryByteOfTheLastRecordIsDroppedOnReopen) {
  const std::string p = path("audit.log");
  write_log(p, 5, 5);  // entries 0..4, checkpoint at 5
  {
    auto log = AuditLog::open(p, test_key(), manual());
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->append(make_entry(5)).ok());
    // No close: the file ends with entry 5, not checkpointed.
  }
  // (The destructor closed it with a checkpoint; rebuild the crash state by hand.)
  const Bytes full = read_bytes(p);
  const AuditFileScan s = scan_audit_file(full);
  ASSERT_GE(s.records.size(), 2u);
  const AuditRecordView& last_entry = s.records[s.records.size() - 2];
  ASSERT_EQ(last_entry.type, AuditRecordType::kEntry);
  // Every cut inside the last entry, then every cut inside the checkpoint after it.
  const uint64_t start = last_entry.offset, end = s.records.back().offset;
  for (uint64_t cut = start + 1; cut < full.size(); ++cut) {
    if (cut == end) continue;  // a clean record boundary: nothing torn
    const uint64_t torn_at = cut < end ? start : end, entries = cut < end ? 5 : 6;
    write_bytes(p, Bytes(full.begin(), full.begin() + static_cast<long>(cut)));
    EXPECT_FALSE(verify_file(p).ok) << cut;  // a torn tail is reported until the log is reopened
    auto log = AuditLog::open(p, test_key(), manual());
    ASSERT_TRUE(log.ok()) << cut << ": " << log.message();
    const AuditOpenReport& rep = (*log)->recovery();
    ASSERT_TRUE(rep.dropped_tail) << cut;
    EXPECT_EQ(rep.dropped_tail->offset, torn_at);
    EXPECT_EQ(rep.dropped_bytes, cut - torn_at);
    EXPECT_EQ(rep.entries, entries);
    ASSERT_TRUE((*log)->close().ok());
    const AuditVerifyReport r = verify_file(p);
    ASSERT_TRUE(r.ok) << cut << ": " << r.reason;
    EXPECT_EQ(r.entries, entries);
    EXPECT_EQ(r.last_checkpoint->tree_size, entries);
  }
}

TEST_F(AuditLogTest, ATornHeaderStartsAFreshLog) {
  const std::string p = path("audit.log");
  write_bytes(p, Bytes(kAuditMagic.begin(), kAuditMagic.begin() + 5));
  auto log = AuditLog::open(p, test_key(), manual());
  ASSERT_TRUE(log.ok()) << log.message();
  EXPECT_TRUE((*log)->recovery().created);
  EXPECT_TRUE((*log)->recovery().dropped_tail);
}

TEST_F(AuditLogTest, RefusesAFileThatIsNotAnAuditLog) {
  const std::string p = path("passwd");
  const std::string text = "root:x:0:0:root:/root:/bin/bash\n";
  write_bytes(p, Bytes(text.begin(), text.end()));
  auto log = AuditLog::open(p, test_key(), manual());
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.message().find("not a tokenhive audit log"), std::string::npos) << log.message();
  EXPECT_EQ(read_bytes(p).size(), text.size());  // untouched
}

TEST_F(AuditLogTest, RefusesToExtendATamperedLog) {
  const std::string p = path("audit.log");
  write_log(p, 6, 3);
  Bytes b = read_bytes(p);
  const AuditFileScan s = scan_audit_file(b);
  // Rewrite entry 1's tenant and re-frame it: the chain breaks at entry 2.
  LoggedEntry e = *decode_entry(s.records[1].payload);
  e.entry.tenant = "mallory";
  const Bytes rec = frame_record(AuditRecordType::kEntry, encode_entry(e));
  const uint64_t at = s.records[1].offset, len = s.records[2].offset - at;
  Bytes tampered(b.begin(), b.begin() + static_cast<long>(at));
  tampered.insert(tampered.end(), rec.begin(), rec.end());
  tampered.insert(tampered.end(), b.begin() + static_cast<long>(at + len), b.end());
  write_bytes(p, tampered);
  auto log = AuditLog::open(p, test_key(), manual());
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.message().find("first bad entry: 1"), std::string::npos) << log.message();
  EXPECT_EQ(read_bytes(p), tampered);  // not a byte written: no checkpoint over the edit
}

TEST_F(AuditLogTest, RefusesAnotherKey) {
  const std::string p = path("audit.log");
  write_log(p, 2, 0);
  auto log = AuditLog::open(p, test_key(9), manual());
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.message().find("another key"), std::string::npos) << log.message();
}

TEST_F(AuditLogTest, TheCheckpointCopyCatchesARollbackOnOpen) {
  const std::string p = path("audit.log"), copy = path("checkpoints.copy");
  AuditLogOptions o = manual();
  o.checkpoint_copy_path = copy;
  write_log(p, 10, 5, o);
  const Bytes at10 = read_bytes(p);
  {
    auto log = AuditLog::open(p, test_key(), o);
    ASSERT_TRUE(log.ok()) << log.message();
    for (uint64_t i = 10; i < 15; ++i) ASSERT_TRUE((*log)->append(make_entry(i)).ok());
    ASSERT_TRUE((*log)->close().ok());
  }
  const AuditVerifyReport good = verify_file(p, copy);
  ASSERT_TRUE(good.ok) << good.reason;
  EXPECT_EQ(good.external_checkpoints, 3u);  // 5, 10, 15

  write_bytes(p, at10);  // restore the older file
  const Bytes copy_before = read_bytes(copy);
  {
    auto log = AuditLog::open(p, test_key(), o);
    ASSERT_FALSE(log.ok());
    EXPECT_NE(log.message().find("truncated or rolled back"), std::string::npos) << log.message();
  }
  EXPECT_EQ(read_bytes(p), at10);
  EXPECT_EQ(read_bytes(copy), copy_before);
  // And a removed log does not silently start over while its copy exists.
  std::filesystem::remove(p);
  auto fresh = AuditLog::open(p, test_key(), o);
  ASSERT_FALSE(fresh.ok());
  EXPECT_NE(fresh.message().find("removed or rolled back"), std::string::npos) << fresh.message();
}

TEST_F(AuditLogTest, TheCopyCatchesUpWithACheckpointItMissed) {
  const std::string p = path("audit.log"), copy = path("checkpoints.copy");
  write_log(p, 4, 2);  // no copy configured: 2 and 4 in the log only
  AuditLogOptions o = manual();
  o.checkpoint_copy_path = copy;
  auto log = AuditLog::open(p, test_key(), o);
  ASSERT_TRUE(log.ok()) << log.message();
  ASSERT_TRUE((*log)->close().ok());
  const AuditVerifyReport r = verify_file(p, copy);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.external_checkpoints, 1u);
}

TEST_F(AuditLogTest, ASecondWriterIsRefused) {
  const std::string p = path("audit.log");
  auto first = AuditLog::open(p, test_key(), manual());
  ASSERT_TRUE(first.ok());
  auto second = AuditLog::open(p, test_key(), manual());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.message().find("in use"), std::string::npos) << second.message();
}

TEST_F(AuditLogTest, CheckpointsByCountFromTheTimerThreadAndConcurrentAppends) {
  const std::string p = path("audit.log");
  AuditLogOptions o;
  o.checkpoint_every_entries = 50;
  o.checkpoint_every_seconds = 0;
  auto log = AuditLog::open(p, test_key(), o);
  ASSERT_TRUE(log.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) ASSERT_TRUE((*log)->append(make_entry(t * 1000 + i)).ok());
    });
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < 500 && (*log)->checkpointed_size() < 350; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GE((*log)->checkpointed_size(), 350u);
  ASSERT_TRUE((*log)->close().ok());
  EXPECT_FALSE((*log)->append(make_entry(0)).ok());
  const AuditVerifyReport r = verify_file(p);
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.entries, 400u);
  EXPECT_GE(r.checkpoints, 1u);  // the thread may find all 400 at its first wake-up
}

TEST_F(AuditLogTest, CheckpointsByTime) {
  const std::string p = path("audit.log");
  AuditLogOptions o;
  o.checkpoint_every_entries = 0;
  o.checkpoint_every_seconds = 0.05;
  auto log = AuditLog::open(p, test_key(), o);
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE((*log)->append(make_entry(0)).ok());
  for (int i = 0; i < 200 && (*log)->checkpointed_size() < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ((*log)->checkpointed_size(), 1u);
}

TEST_F(AuditLogTest, KeysRoundTripThroughPem) {
  const Ed25519PrivateKey k = test_key();
  Result<Ed25519PrivateKey> back = Ed25519PrivateKey::from_pem(k.pem());
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->public_key().raw(), k.public_key().raw());
  Result<Ed25519PublicKey> pub = Ed25519PublicKey::from_pem(k.public_key().pem());
  ASSERT_TRUE(pub.ok()) << pub.message();
  const std::string msg = "checkpoint";
  const std::span<const uint8_t> m(reinterpret_cast<const uint8_t*>(msg.data()), msg.size());
  Ed25519Signature sig = k.sign(m);
  EXPECT_TRUE(pub->verify(m, sig));
  sig[10] ^= 1;
  EXPECT_FALSE(pub->verify(m, sig));
  EXPECT_FALSE(Ed25519PublicKey::from_pem(k.pem()).ok());  // a private key is not a public one
  EXPECT_FALSE(Ed25519PrivateKey::from_pem("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n").ok());
}

}  // namespace
}  // namespace th::audit
