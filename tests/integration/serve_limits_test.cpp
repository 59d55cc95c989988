// `tokenhive serve` and what its keys, salts and logs promise (issue #15, items 5 and 7):
// cache_salt keeps requests with different salts from sharing prefix-cache blocks, the
// access log says how many bytes went to which client and when a cancelled stream's
// tokens came, a key capped below normal may leave out `priority`, and a request with
// two Authorization headers is refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "http_test_client.h"
#include "run_process.h"
#include "serve_process.h"
#include "test_util.h"

namespace th {
namespace {

using json = nlohmann::json;
using test::HttpReply;
using test::request;
using test::ServeProcess;
using test::TestConnection;

using test::stories;

int cached_tokens(const HttpReply& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return -1;
  return json::parse(r.body)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
}

std::vector<json> log_lines(const std::string& path) {
  std::vector<json> out;
  std::istringstream in(test::slurp(path));
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

// vLLM's meaning (docs/CONVENTIONS.md): the same salt shares, a distinct salt opts out, and
// no salt is a salt of its own. 96 tokens: six full blocks of 16.
TEST(ServeCacheSalt, ADistinctSaltOptsOutOfSharing) {
  ServeProcess s({"-m", stories(), "-t", "1", "--kv-cache-mib", "64"});
  ASSERT_TRUE(s.ok()) << s.log();
  json body = {{"prompt", "Once upon a time there was a little girl named Lily who loved to play outside in the sun "
                          "with her big red ball and her small brown dog, and every day they ran to the park near "
                          "the old tree by the river"},
               {"max_tokens", 2},
               {"temperature", 0}};
  auto run = [&](const char* salt) {
    json b = body;
    if (salt) b["cache_salt"] = salt;
    return cached_tokens(request(s.port(), "POST", "/v1/completions", b.dump()));
  };
  EXPECT_EQ(run("s1"), 0);
  EXPECT_GT(run("s1"), 0) << "the same salt shares";
  EXPECT_EQ(run("s2"), 0) << "a distinct salt opts out";
  EXPECT_EQ(run(nullptr), 0) << "no salt is not s1's or s2's";
  EXPECT_GT(run("s2"), 0);
  HttpReply bad = request(s.port(), "POST", "/v1/completions", json{{"prompt", "x"}, {"cache_salt", 5}}.dump());
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(json::parse(bad.body)["error"]["param"], "cache_salt");
}

TEST(ServeAccessLog, BytesClientAndTheTimesOfACancelledStream) {
  const std::string log_path = test::temp_path("limits_access.log");
  ::unlink(log_path.c_str());
  ServeProcess s({"-m", stories(), "-t", "1", "--kv-cache-mib", "64", "--access-log", log_path});
  ASSERT_TRUE(s.ok()) << s.log();
  const HttpReply plain =
      request(s.port(), "POST", "/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 3}, {"temperature", 0}}.dump());
  ASSERT_EQ(plain.status, 200) << plain.body;
  {
    TestConnection c(s.port());
    const std::string body =
        json{{"prompt", ""}, {"max_tokens", 400}, {"ignore_eos", true}, {"stream", true}}.dump();
    ASSERT_TRUE(c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\n\r\n" + body));
    ASSERT_TRUE(c.read_until("data: "));
    ASSERT_TRUE(c.read_until("data: "));  // at least a token delivered
  }  // closed mid-stream
  const HttpReply missing = request(s.port(), "POST", "/v1/completions", "{");
  EXPECT_EQ(missing.status, 400);
  EXPECT_EQ(s.stop(), 0);

  const std::regex client("127\\.0\\.0\\.1:[0-9]+");
  int seen_plain = 0, seen_cancelled = 0, seen_invalid = 0;
  for (const json& j : log_lines(log_path)) {
    SCOPED_TRACE(j.dump());
    EXPECT_TRUE(j["client"].is_string() && std::regex_match(j["client"].get<std::string>(), client));
    if (j["status"] == 400) {
      ++seen_invalid;
      EXPECT_GT(j["bytes_out"].get<int64_t>(), 0);
    } else if (j["finish_reason"] == "cancelled") {
      ++seen_cancelled;
      EXPECT_GT(j["completion_tokens"].get<int>(), 0);
      EXPECT_TRUE(j["ttft_ms"].is_number()) << "tokens were delivered";
      EXPECT_TRUE(j["queue_ms"].is_number());
      EXPECT_GT(j["bytes_out"].get<int64_t>(), 0);
    } else if (j["status"] == 200) {
      ++seen_plain;
      EXPECT_EQ(j["bytes_out"].get<int64_t>(), static_cast<int64_t>(plain.body.size()));
    }
  }
  EXPECT_EQ(seen_plain, 1);
  EXPECT_EQ(seen_cancelled, 1);
  EXPECT_EQ(seen_invalid, 1);
  ::unlink(log_path.c_str());
}

TEST(ServeKeyPolicy, LowCappedKeyDefaultsToItsCapAndTwoAuthorizationsAre400) {
  const std::string keys_path = test::temp_path("limits_keys.txt");
  {
    std::ofstream out(keys_path);
    out << "sk-low-0123456789abcdef lowly max_priority=low\n"
        << "sk-other-0123456789abcdef other\n";
  }
  ServeProcess s({"-m", stories(), "-t", "1", "--kv-cache-mib", "64", "--api-keys", keys_path, "--admin-token",
                  "adm1n-t0ken"});
  ASSERT_TRUE(s.ok()) << s.log();
  const std::string low = "Authorization: Bearer sk-low-0123456789abcdef\r\n";
  const std::string other = "Authorization: Bearer sk-other-0123456789abcdef\r\n";
  const json body = {{"prompt", "Once"}, {"max_tokens", 2}, {"temperature", 0}};
  HttpReply r = request(s.port(), "POST", "/v1/completions", body.dump(), low);
  EXPECT_EQ(r.status, 200) << "no priority: the key's cap, not normal: " << r.body;
  json normal = body;
  normal["priority"] = "normal";
  r = request(s.port(), "POST", "/v1/completions", normal.dump(), low);
  EXPECT_EQ(r.status, 403) << r.body;

  // Two Authorization headers: which counts would be a guess; refused, the header named.
  for (const std::string& second : {other, low}) {
    r = request(s.port(), "POST", "/v1/completions", body.dump(), low + second);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(json::parse(r.body)["error"]["message"].get<std::string>().find("Authorization"), std::string::npos)
        << r.body;
  }
  r = request(s.port(), "POST", "/admin/drain", "",
              "Authorization: Bearer adm1n-t0ken\r\nAuthorization: Bearer adm1n-t0ken\r\n");
  EXPECT_EQ(r.status, 400) << r.body;
  // The admin token's scheme in any case, as for keys.
  r = request(s.port(), "POST", "/admin/drain", "", "Authorization: bearer  adm1n-t0ken\r\n");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(s.stop(), 0);
  ::unlink(keys_path.c_str());
}

}  // namespace
}  // namespace th
