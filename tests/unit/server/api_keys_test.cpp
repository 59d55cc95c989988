#include "server/api_keys.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace th::server {
namespace {

const std::string kKeyA = "sk-aaaaaaaaaaaaaaaaaaaaaaaa";  // 27 characters
const std::string kKeyB = "sk-bbbbbbbbbbbbbbbbbbbbbbbb";

ApiKeyStore must_parse(std::string_view text) {
  Result<ApiKeyStore> r = ApiKeyStore::parse(text, "keys.txt");
  EXPECT_TRUE(r.ok()) << r.message();
  return std::move(r).value();
}

std::string parse_error(std::string_view text) {
  Result<ApiKeyStore> r = ApiKeyStore::parse(text, "keys.txt");
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.message();
}

TEST(ApiKeys, ParsesKeysOptionsCommentsAndDefaults) {
  ApiKeyStore s = must_parse(
      "# tokenhive keys\n"
      "\n"
      "   \t \n" +
      kKeyA + " acme\n" + kKeyB +
      "\tbeta.team-1  max_priority=normal rpm=60 tpm=12000.5   # the beta key\n"
      "sk-cccccccccccccccc   gamma max_priority=-7 tpm=0\r\n"
      "sk-dddddddddddddddd   delta max_priority=low rpm=0.5\n"
      "sk-eeeeeeeeeeeeeeee   eps tpm=3 max_priority=high");  // no final newline
  ASSERT_EQ(s.size(), 5u);
  const auto& k = s.keys();
  EXPECT_EQ(k[0].key, kKeyA);
  EXPECT_EQ(k[0].tenant, "acme");
  EXPECT_EQ(k[0].max_priority, std::numeric_limits<int32_t>::min());  // no restriction
  EXPECT_EQ(k[0].requests_per_minute, 0);
  EXPECT_EQ(k[0].tokens_per_minute, 0);
  EXPECT_EQ(k[1].tenant, "beta.team-1");
  EXPECT_EQ(k[1].max_priority, 0);
  EXPECT_EQ(k[1].requests_per_minute, 60);
  EXPECT_EQ(k[1].tokens_per_minute, 12000.5);
  EXPECT_EQ(k[2].key, "sk-cccccccccccccccc");  // CR stripped
  EXPECT_EQ(k[2].max_priority, -7);
  EXPECT_EQ(k[3].max_priority, 1);
  EXPECT_EQ(k[3].requests_per_minute, 0.5);
  EXPECT_EQ(k[4].max_priority, -1);
  EXPECT_EQ(k[4].tokens_per_minute, 3);
}

TEST(ApiKeys, KeyLengthBoundsAndCharacters) {
  must_parse(std::string(16, 'k') + " t\n");
  must_parse(std::string(256, 'k') + " t\n");
  must_parse("!\"$%&'()*+,-./0123456789:;<=>?@[\\]^_`{|}~#Zz t\n");  // all punctuation, '#' inside
  EXPECT_EQ(parse_error(std::string(15, 'k') + " t\n"), "keys.txt:1: key is 15 characters; a key is 16..256");
  EXPECT_EQ(parse_error(cat("\n", std::string(257, 'k'), " t\n")), "keys.txt:2: key is 257 characters; a key is 16..256");
  EXPECT_EQ(parse_error("sk-aaaaaaaa\x01" "aaaaaaaaaa t\n"),
            "keys.txt:1: key has a character outside printable ASCII (0x21..0x7e)");
  EXPECT_EQ(parse_error("sk-aaaaaaaa\xc3\xa9" "aaaaaaaaaa t\n"),
            "keys.txt:1: key has a character outside printable ASCII (0x21..0x7e)");
}

TEST(ApiKeys, EveryErrorNamesFileAndLine) {
  const std::string ok = kKeyA + " acme\n";
  EXPECT_EQ(parse_error(ok + kKeyB + "\n"), "keys.txt:2: no tenant after the key (KEY TENANT [options])");
  EXPECT_EQ(parse_error(ok + kKeyB + " # tenant commented out\n"),
            "keys.txt:2: no tenant after the key (KEY TENANT [options])");
  EXPECT_EQ(parse_error(ok + "#\n" + kKeyB + " bad/tenant\n"),
            "keys.txt:3: tenant must be 1..64 characters of [A-Za-z0-9_.-] (got 10 characters)");
  EXPECT_NE(parse_error(ok + kKeyB + " " + std::string(65, 't') + "\n").find("keys.txt:2: tenant must be"),
            std::string::npos);
  must_parse(kKeyB + " " + std::string(64, 't') + "\n");
  EXPECT_EQ(parse_error(ok + kKeyB + " t rpm=1 color=red\n"),
            "keys.txt:2: field 4 is not an option; options are max_priority=, rpm=, tpm=, pii=, max_concurrency=");
  EXPECT_EQ(parse_error(ok + kKeyB + " t extra\n"),
            "keys.txt:2: field 3 is not an option; options are max_priority=, rpm=, tpm=, pii=, max_concurrency=");
  EXPECT_EQ(parse_error(ok + kKeyB + " t rpm=1 rpm=2\n"), "keys.txt:2: rpm given twice");
  EXPECT_EQ(parse_error(ok + kKeyB + " t max_priority=low max_priority=high\n"),
            "keys.txt:2: max_priority given twice");
  for (const char* bad : {"urgent", "", "1.5", "99999999999", "-", "+", "1x", "HIGH"})
    EXPECT_EQ(parse_error(ok + kKeyB + " t max_priority=" + bad + "\n"),
              "keys.txt:2: max_priority must be high, normal, low or an int32")
        << bad;
  EXPECT_EQ(ApiKeyStore::parse(kKeyB + " t max_priority=+3\n", "k").value().keys()[0].max_priority, 3);
  for (const char* bad : {"-1", "", "1e3", "inf", "nan", "0x10", "1.2.3", ".", "10000000000000"}) {
    std::string e = parse_error(ok + kKeyB + " t tpm=" + bad + "\n");
    EXPECT_EQ(e.rfind("keys.txt:2: tpm must be a decimal number in 0..", 0), 0u) << bad << ": " << e;
  }
  EXPECT_EQ(parse_error(ok + "\n" + kKeyA + " other\n"), "keys.txt:3: duplicate key (first on line 1)");
}

TEST(ApiKeys, ErrorsNeverQuoteTheKey) {
  // A key with a stray space: its second half lands where the tenant goes.
  std::string e = parse_error("sk-secret-half-one secret/half/two\n");
  EXPECT_EQ(e.find("secret"), std::string::npos) << e;
  e = parse_error("sk-secret-half-one t secret-half-two\n");
  EXPECT_EQ(e.find("secret"), std::string::npos) << e;
  e = parse_error("sk-secret-half-one t\nsk-secret-half-one u\n");
  EXPECT_EQ(e.find("secret"), std::string::npos) << e;
}

TEST(ApiKeys, EmptyFileIsAnError) {
  for (const char* text : {"", "\n\n", "# only a comment\n   # another\n"})
    EXPECT_EQ(parse_error(text), "keys.txt: no keys (a server with --api-keys and no key would refuse every request)");
}

TEST(ApiKeys, LoadReadsAFileAndNamesItInErrors) {
  char path[] = "/tmp/th_api_keys_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string text = kKeyA + " acme\nshort t\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  Result<ApiKeyStore> r = ApiKeyStore::load(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), std::string(path) + ":2: key is 5 characters; a key is 16..256");
  FILE* f = std::fopen(path, "w");
  std::fputs((kKeyA + " acme\n").c_str(), f);
  std::fclose(f);
  r = ApiKeyStore::load(path);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->keys()[0].tenant, "acme");
  std::remove(path);
  r = ApiKeyStore::load(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find(std::string(path) + ": cannot open the key file"), std::string::npos) << r.message();
}

TEST(ApiKeys, AuthenticateBearer) {
  ApiKeyStore s = must_parse(kKeyA + " acme\n" + kKeyB + " beta\n");
  const ApiKey* a = s.authenticate("Bearer " + kKeyA);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->tenant, "acme");
  ASSERT_NE(s.authenticate("Bearer " + kKeyB), nullptr);
  EXPECT_EQ(s.authenticate("Bearer " + kKeyB)->tenant, "beta");
  // Scheme in any case; spaces and tabs around.
  EXPECT_EQ(s.authenticate("bearer " + kKeyA), a);
  EXPECT_EQ(s.authenticate("BEARER " + kKeyA), a);
  EXPECT_EQ(s.authenticate("  BeArEr \t  " + kKeyA + " \t"), a);
  // Not Bearer, or no key.
  EXPECT_EQ(s.authenticate(kKeyA), nullptr);
  EXPECT_EQ(s.authenticate("Basic " + kKeyA), nullptr);
  EXPECT_EQ(s.authenticate("Bearer" + kKeyA), nullptr);
  EXPECT_EQ(s.authenticate("Bearer"), nullptr);
  EXPECT_EQ(s.authenticate("Bearer   "), nullptr);
  EXPECT_EQ(s.authenticate(""), nullptr);
  EXPECT_EQ(s.authenticate("Token " + kKeyA), nullptr);
  // Wrong keys: one character off anywhere, prefixes, extensions, other lengths.
  for (size_t i = 0; i < kKeyA.size(); ++i) {
    std::string k = kKeyA;
    k[i] = k[i] == 'a' ? 'b' : 'a';
    EXPECT_EQ(s.authenticate("Bearer " + k), nullptr) << i;
  }
  EXPECT_EQ(s.authenticate("Bearer " + kKeyA.substr(0, kKeyA.size() - 1)), nullptr);
  EXPECT_EQ(s.authenticate("Bearer " + kKeyA + "a"), nullptr);
  EXPECT_EQ(s.authenticate("Bearer " + kKeyA + std::string(1, '\0')), nullptr);  // zero padding is not a match
  EXPECT_EQ(s.authenticate("Bearer " + kKeyA + " " + kKeyB), nullptr);
  EXPECT_EQ(s.authenticate("Bearer short"), nullptr);
  EXPECT_EQ(s.authenticate(cat("Bearer ", std::string(10000, 'a'))), nullptr);
}

TEST(ApiKeys, LongestKeysAndKeysLongerThanTheLimit) {
  const std::string longest(256, 'z');
  ApiKeyStore s = must_parse(longest + " z\n");
  EXPECT_NE(s.find_key(longest), nullptr);
  // 257 characters whose first 256 are the stored key: compared over 256
  // bytes only, it must still not match.
  EXPECT_EQ(s.find_key(longest + "z"), nullptr);
  EXPECT_EQ(s.find_key(longest.substr(0, 255)), nullptr);
  EXPECT_EQ(s.find_key(""), nullptr);
}

TEST(ApiKeys, FindsEveryKeyOfAManyKeyStore) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += cat("sk-key-number-", 100000 + i, " t", i, "\n");
  ApiKeyStore s = must_parse(text);
  for (int i = 0; i < 300; ++i) {
    const ApiKey* k = s.find_key(cat("sk-key-number-", 100000 + i));
    ASSERT_NE(k, nullptr) << i;
    EXPECT_EQ(k->tenant, cat("t", i));
  }
  EXPECT_EQ(s.find_key("sk-key-number-100300"), nullptr);
}

TEST(ApiKeys, PriorityCheckIsA403NeverASubstitution) {
  ApiKey k;
  EXPECT_FALSE(check_priority(k, std::numeric_limits<int32_t>::min()));  // default: anything goes
  k.max_priority = 0;  // normal
  EXPECT_FALSE(check_priority(k, 0));
  EXPECT_FALSE(check_priority(k, 1));
  EXPECT_FALSE(check_priority(k, 100));
  std::optional<http::ApiError> e = check_priority(k, -1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message.rfind("priority high not allowed for this key", 0), 0u) << e->message;
  EXPECT_EQ(e->param, "priority");
  EXPECT_EQ(http::default_error_type(403), "permission_error");
  e = check_priority(k, -5);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message.rfind("priority -5 not allowed for this key", 0), 0u) << e->message;
  EXPECT_EQ(priority_name(-1), "high");
  EXPECT_EQ(priority_name(0), "normal");
  EXPECT_EQ(priority_name(1), "low");
  EXPECT_EQ(priority_name(7), "7");
}

}  // namespace
}  // namespace th::server

namespace th::server {
namespace {

TEST(ApiKeys, PiiPolicyOption) {
  Result<ApiKeyStore> s = ApiKeyStore::parse(
      "sk-aaaaaaaaaaaaaaaa a pii=mask\nsk-bbbbbbbbbbbbbbbb b pii=pseudonymize\nsk-cccccccccccccccc c\n", "keys.txt");
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->keys()[0].pii, PiiPolicy::Mask);
  EXPECT_EQ(s->keys()[1].pii, PiiPolicy::Pseudonymize);
  EXPECT_EQ(s->keys()[2].pii, PiiPolicy::Off);
  Result<ApiKeyStore> bad = ApiKeyStore::parse("sk-aaaaaaaaaaaaaaaa a pii=yes\n", "keys.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "keys.txt:1: pii must be off, mask or pseudonymize");
}

}  // namespace
}  // namespace th::server
