#include "model/encrypted_model.h"

#include <chrono>

#include <gtest/gtest.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include "format/gguf.h"
#include "test_util.h"

namespace th {
namespace {

Kek key(uint8_t seed) {
  Kek k;
  for (size_t i = 0; i < k.bytes.size(); ++i) k.bytes[i] = static_cast<uint8_t>(seed * 31 + i);
  return k;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

constexpr size_t kChunk = 4096;

std::vector<uint8_t> seal(const std::vector<uint8_t>& plain, const Kek& k) {
  Result<std::vector<uint8_t>> env = encrypt_model(plain.data(), plain.size(), k, EnvelopeOptions{kChunk});
  EXPECT_TRUE(env.ok()) << env.message();
  return env.ok() ? *env : std::vector<uint8_t>{};
}

Result<MappedFile> open_env(const std::vector<uint8_t>& env, const Kek& k, int threads = 2) {
  return decrypt_model(env.data(), env.size(), k, "test", threads);
}

TEST(EncryptedModel, RoundTripsOddSizesAtAnyThreadCount) {
  for (size_t n : {size_t{0}, size_t{1}, kChunk - 1, kChunk, kChunk + 1, 3 * kChunk + 5, 17 * kChunk + 4000}) {
    const std::vector<uint8_t> plain = random_bytes(n, static_cast<uint32_t>(n));
    const std::vector<uint8_t> env = seal(plain, key(1));
    EXPECT_EQ(env.size(), kEnvelopeHeaderBytes + n + std::max<size_t>(1, (n + kChunk - 1) / kChunk) * kEnvelopeTagBytes);
    EXPECT_TRUE(is_encrypted_model(env.data(), env.size()));
    for (int threads : {1, 3}) {
      Result<MappedFile> out = open_env(env, key(1), threads);
      ASSERT_TRUE(out.ok()) << n << ": " << out.message();
      ASSERT_EQ(out->size(), n);
      EXPECT_TRUE(n == 0 || std::equal(plain.begin(), plain.end(), out->data())) << n;
    }
  }
}

TEST(EncryptedModel, SamePlaintextEncryptsDifferentlyEachTime) {
  const std::vector<uint8_t> plain = random_bytes(10000, 3);
  EXPECT_NE(seal(plain, key(1)), seal(plain, key(1)));
}

TEST(EncryptedModel, WrongKeyIsRefused) {
  const std::vector<uint8_t> env = seal(random_bytes(9000, 4), key(1));
  Result<MappedFile> out = open_env(env, key(2));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.message().find("does not open"), std::string::npos) << out.message();
}

// Property: a flipped byte anywhere (header, tags, ciphertext) is refused, never loaded.
TEST(EncryptedModel, EveryFlippedByteIsRefused) {
  const std::vector<uint8_t> env = seal(random_bytes(5 * kChunk + 123, 5), key(1));
  std::mt19937 rng(11);
  std::vector<size_t> offsets;
  for (size_t i = 0; i < kEnvelopeHeaderBytes; ++i) offsets.push_back(i);  // every header byte
  for (int i = 0; i < 400; ++i) offsets.push_back(rng() % env.size());
  offsets.push_back(env.size() - 1);
  for (size_t off : offsets) {
    std::vector<uint8_t> bad = env;
    bad[off] ^= static_cast<uint8_t>(1u << (rng() % 8));
    EXPECT_FALSE(open_env(bad, key(1)).ok()) << "flip at " << off;
  }
}

TEST(EncryptedModel, TruncatedExtendedSwappedOrDroppedChunksAreRefused) {
  const size_t n = 4 * kChunk + 77;
  const std::vector<uint8_t> env = seal(random_bytes(n, 6), key(1));
  std::mt19937 rng(12);
  for (int i = 0; i < 100; ++i) {
    std::vector<uint8_t> cut(env.begin(), env.begin() + static_cast<long>(rng() % env.size()));
    EXPECT_FALSE(open_env(cut, key(1)).ok()) << cut.size();
  }
  std::vector<uint8_t> longer = env;
  longer.push_back(0);
  EXPECT_FALSE(open_env(longer, key(1)).ok());
  const size_t stride = kChunk + kEnvelopeTagBytes;
  auto chunk_at = [&](size_t i) { return env.begin() + static_cast<long>(kEnvelopeHeaderBytes + i * stride); };
  // Swap chunks 1 and 2 (same size): each is authenticated under its index.
  std::vector<uint8_t> swapped = env;
  std::copy(chunk_at(1), chunk_at(2), swapped.begin() + static_cast<long>(kEnvelopeHeaderBytes + 2 * stride));
  std::copy(chunk_at(2), chunk_at(3), swapped.begin() + static_cast<long>(kEnvelopeHeaderBytes + 1 * stride));
  Result<MappedFile> r = open_env(swapped, key(1));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("chunk 1 "), std::string::npos) << r.message();
  // Drop chunk 3 and duplicate chunk 0 in its place: sizes match, the nonce does not.
  std::vector<uint8_t> replayed = env;
  std::copy(chunk_at(0), chunk_at(1), replayed.begin() + static_cast<long>(kEnvelopeHeaderBytes + 3 * stride));
  EXPECT_FALSE(open_env(replayed, key(1)).ok());
  // A chunk from another file made with the same key.
  const std::vector<uint8_t> other = seal(random_bytes(n, 7), key(1));
  std::vector<uint8_t> spliced = env;
  std::copy(other.begin() + static_cast<long>(kEnvelopeHeaderBytes), other.begin() + static_cast<long>(kEnvelopeHeaderBytes + stride),
            spliced.begin() + static_cast<long>(kEnvelopeHeaderBytes));
  EXPECT_FALSE(open_env(spliced, key(1)).ok());
  // The real last chunk must be flagged last: cutting the file after a full chunk fails even
  // if the header's size were right (it is authenticated, so it is not).
  std::vector<uint8_t> short_one(env.begin(), chunk_at(2));
  EXPECT_FALSE(open_env(short_one, key(1)).ok());
}

TEST(EncryptedModel, RekeyChangesOnlyTheWrap) {
  const std::string path = test::temp_path("rekey.enc");
  const std::vector<uint8_t> plain = random_bytes(3 * kChunk, 8);
  const std::vector<uint8_t> env = seal(plain, key(1));
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(env.data()), static_cast<long>(env.size()));
  ASSERT_TRUE(rekey_model_file(path, key(1), key(2)).ok());
  EXPECT_FALSE(rekey_model_file(path, key(1), key(3)).ok());  // the old key no longer opens it
  Result<MappedFile> after = MappedFile::open(path);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), env.size());
  EXPECT_TRUE(std::equal(env.begin(), env.begin() + 64, after->data()));
  EXPECT_TRUE(std::equal(env.begin() + static_cast<long>(kEnvelopeHeaderBytes), env.end(), after->data() + kEnvelopeHeaderBytes));
  EXPECT_FALSE(decrypt_model(after->data(), after->size(), key(1), path).ok());
  Result<MappedFile> out = decrypt_model(after->data(), after->size(), key(2), path);
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_TRUE(std::equal(plain.begin(), plain.end(), out->data()));
  ::unlink(path.c_str());
}

TEST(EncryptedModel, KeysFromFilesEnvironmentAndCommands) {
  const std::string path = test::temp_path("kek.hex");
  ::unlink(path.c_str());
  ASSERT_TRUE(write_new_kek(path).ok());
  EXPECT_FALSE(write_new_kek(path).ok()) << "never overwrites a key";
  Result<Kek> from_file = load_kek(path);
  ASSERT_TRUE(from_file.ok()) << from_file.message();
  std::ifstream in(path);
  std::string hex;
  std::getline(in, hex);
  ::setenv("TH_TEST_KEK", hex.c_str(), 1);
  Result<Kek> from_env = load_kek("env:TH_TEST_KEK");
  ASSERT_TRUE(from_env.ok()) << from_env.message();
  EXPECT_EQ(from_env->bytes, from_file->bytes);
  Result<Kek> from_cmd = load_kek("cmd:cat " + path);
  ASSERT_TRUE(from_cmd.ok()) << from_cmd.message();
  EXPECT_EQ(from_cmd->bytes, from_file->bytes);
  EXPECT_FALSE(load_kek("env:TH_TEST_KEK_UNSET").ok());
  EXPECT_FALSE(load_kek("cmd:false").ok());
  ::setenv("TH_TEST_KEK", "abc", 1);
  EXPECT_FALSE(load_kek("env:TH_TEST_KEK").ok());
  EXPECT_FALSE(load_kek("/nonexistent/key").ok());
  ::unlink(path.c_str());
}

// A key helper that hangs is killed at the timeout (not waited for forever); one that fails
// says how, in words (not a raw wait status: "exited with status 768").
TEST(EncryptedModel, KeyCommandHasATimeoutAndSaysHowItFailed) {
  const auto t0 = std::chrono::steady_clock::now();
  Result<Kek> hung = load_kek("cmd:sleep 30", std::chrono::milliseconds(300));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(hung.ok());
  EXPECT_LT(took, 5.0);
  EXPECT_NE(hung.message().find("killed"), std::string::npos) << hung.message();
  // Its grandchildren too: the whole process group goes.
  Result<Kek> bg = load_kek("cmd:sleep 30 & wait", std::chrono::milliseconds(300));
  ASSERT_FALSE(bg.ok());
  Result<Kek> failed = load_kek("cmd:exit 3");
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("exited with status 3"), std::string::npos) << failed.message();
  Result<Kek> killed = load_kek("cmd:kill -TERM $$");
  ASSERT_FALSE(killed.ok());
  EXPECT_NE(killed.message().find("killed by signal 15"), std::string::npos) << killed.message();
  EXPECT_EQ(kKeyCommandTimeout, std::chrono::seconds(10));
}

TEST(EncryptedModel, OpenModelLoadsTheRealModelAndRefusesMismatches) {
  const std::string plain_path = test::shared_path("models/stories260K.gguf");
  const std::string enc = test::temp_path("stories.enc"), kek = test::temp_path("stories.kek");
  ::unlink(kek.c_str());
  ASSERT_TRUE(write_new_kek(kek).ok());
  ASSERT_TRUE(encrypt_model_file(plain_path, enc, *load_kek(kek), EnvelopeOptions{64 << 10}).ok());
  Result<GgufFile> a = open_model(plain_path, "");
  Result<GgufFile> b = open_model(enc, kek);
  ASSERT_TRUE(a.ok() && b.ok()) << b.message();
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  EXPECT_EQ(a->metadata().size(), b->metadata().size());
  EXPECT_FALSE(open_model(enc, "").ok());          // encrypted, no key
  EXPECT_FALSE(open_model(plain_path, kek).ok());  // a key, but plaintext
  ::unlink(enc.c_str());
  ::unlink(kek.c_str());
}

}  // namespace
}  // namespace th
