#include "client/response_cache.h"

#include <gtest/gtest.h>

#include <string>

namespace th::client {
namespace {

Response ok(std::string body) {
  Response r;
  r.status = 200;
  r.headers = {{"content-type", "application/json"}};
  r.body = std::move(body);
  return r;
}

TEST(ResponseCache, OnlyExplicitGreedyNonStreamedJsonIsCacheable) {
  const std::string path = "/v1/completions";
  EXPECT_TRUE(ResponseCache::key_for("POST", path, R"({"prompt":"a","temperature":0})", {}));
  EXPECT_TRUE(ResponseCache::key_for("POST", path, R"({"prompt":"a","temperature":0.0,"stream":false})", {}));
  EXPECT_TRUE(ResponseCache::key_for("POST", path, R"({"prompt":"a","temperature":0,"stream":null})", {}));
  EXPECT_FALSE(ResponseCache::key_for("POST", path, R"({"prompt":"a"})", {}));  // absent = the default, 1
  EXPECT_FALSE(ResponseCache::key_for("POST", path, R"({"prompt":"a","temperature":0.7})", {}));
  EXPECT_FALSE(ResponseCache::key_for("POST", path, R"({"prompt":"a","temperature":"0"})", {}));
  EXPECT_FALSE(ResponseCache::key_for("POST", path, R"({"prompt":"a","temperature":null})", {}));
  EXPECT_FALSE(ResponseCache::key_for("POST", path, R"({"prompt":"a","temperature":0,"stream":true})", {}));
  EXPECT_FALSE(ResponseCache::key_for("POST", path, R"([{"temperature":0}])", {}));
  EXPECT_FALSE(ResponseCache::key_for("POST", path, R"({"temperature":0)", {}));  // not JSON
  EXPECT_FALSE(ResponseCache::key_for("GET", "/v1/models", "", {}));
}

TEST(ResponseCache, KeyIsMethodPathBodyAndHeaders) {
  const std::string b = R"({"prompt":"a","temperature":0})";
  const auto k = *ResponseCache::key_for("POST", "/v1/completions", b, {});
  EXPECT_EQ(k, *ResponseCache::key_for("POST", "/v1/completions", b, {}));
  EXPECT_NE(k, *ResponseCache::key_for("PUT", "/v1/completions", b, {}));
  EXPECT_NE(k, *ResponseCache::key_for("POST", "/v1/chat/completions", b, {}));
  EXPECT_NE(k, *ResponseCache::key_for("POST", "/v1/completions", R"({"prompt":"b","temperature":0})", {}));
  EXPECT_NE(k, *ResponseCache::key_for("POST", "/v1/completions", b, {{"X-Tenant", "t"}}));
  EXPECT_EQ(*ResponseCache::key_for("POST", "/p", b, {{"X-Tenant", "t"}}),
            *ResponseCache::key_for("POST", "/p", b, {{"x-tenant", "t"}}));
}

TEST(ResponseCache, HitsMissesAndOnly200) {
  ResponseCache cache({.enabled = true, .max_entries = 4, .max_bytes = 1 << 20});
  EXPECT_FALSE(cache.get("k"));
  cache.put("k", ok("body"));
  Response bad = ok("x");
  bad.status = 503;
  cache.put("e", bad);
  auto hit = cache.get("k");
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->body, "body");
  EXPECT_EQ(hit->header("Content-Type"), "application/json");
  EXPECT_FALSE(cache.get("e"));
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 2u);
  cache.put("k", ok("newer"));
  EXPECT_EQ(cache.get("k")->body, "newer");
  EXPECT_EQ(cache.size(), 1u);
}

TEST(ResponseCache, LruByEntries) {
  ResponseCache cache({.enabled = true, .max_entries = 3, .max_bytes = 1 << 20});
  cache.put("a", ok("1"));
  cache.put("b", ok("2"));
  cache.put("c", ok("3"));
  ASSERT_TRUE(cache.get("a"));  // a is now the most recent; b the least
  cache.put("d", ok("4"));
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_FALSE(cache.get("b"));
  EXPECT_TRUE(cache.get("a"));
  EXPECT_TRUE(cache.get("c"));
  EXPECT_TRUE(cache.get("d"));
}

TEST(ResponseCache, LruByBytes) {
  ResponseCache cache({.enabled = true, .max_entries = 100, .max_bytes = 3000});
  cache.put("a", ok(std::string(1000, 'a')));
  cache.put("b", ok(std::string(1000, 'b')));
  EXPECT_EQ(cache.size(), 2u);
  cache.put("c", ok(std::string(1000, 'c')));  // each costs a bit over 1000: a goes
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_FALSE(cache.get("a"));
  EXPECT_LE(cache.bytes(), 3000u);
  cache.put("huge", ok(std::string(5000, 'h')));  // bigger than the whole cache: not stored, nothing evicted
  EXPECT_FALSE(cache.get("huge"));
  EXPECT_EQ(cache.size(), 2u);
}

}  // namespace
}  // namespace th::client
