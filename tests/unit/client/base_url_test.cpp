#include <gtest/gtest.h>

#include "client/http_client.h"

namespace th::client {
namespace {

TEST(BaseUrl, HostPortAndPrefix) {
  auto a = parse_base_url("http://127.0.0.1:8080");
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8080);
  EXPECT_EQ(a->authority, "127.0.0.1:8080");
  EXPECT_EQ(a->prefix, "");
  auto b = parse_base_url("HTTP://example.com/api/v2/");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "example.com");
  EXPECT_EQ(b->port, 80);
  EXPECT_EQ(b->prefix, "/api/v2");
  auto c = parse_base_url("http://[::1]:9000/");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, 9000);
  EXPECT_EQ(c->authority, "[::1]:9000");
  EXPECT_EQ(c->prefix, "");
}

TEST(BaseUrl, Refusals) {
  auto https = parse_base_url("https://api.example.com");
  ASSERT_FALSE(https.ok());
  EXPECT_NE(https.message().find("https is not supported"), std::string::npos);
  for (const char* bad : {"", "ftp://x", "127.0.0.1:80", "http://", "http://:80", "http://h:0", "http://h:65536",
                          "http://h:x", "http://h:", "http://u@h", "http://h/p?q=1", "http://[::1", "http://[::1]x"})
    EXPECT_FALSE(parse_base_url(bad).ok()) << bad;
}

TEST(HttpClient, CreateRefusesHttpsAndBadOptions) {
  EXPECT_FALSE(HttpClient::create("https://x").ok());
  HttpClientOptions o;
  o.retry.max_attempts = 0;
  EXPECT_FALSE(HttpClient::create("http://127.0.0.1:1", o).ok());
}

TEST(HttpClient, BadMethodPathOrHeaderIsAnErrorBeforeAnyConnection) {
  auto client = HttpClient::create("http://127.0.0.1:1");
  ASSERT_TRUE(client.ok());
  EXPECT_FALSE((*client)->request("GE T", "/x").ok());
  EXPECT_FALSE((*client)->request("GET", "x").ok());
  EXPECT_FALSE((*client)->request("GET", "/a b").ok());
  EXPECT_FALSE((*client)->request("GET", "/x", "", {{"X-A", "v\r\nInjected: 1"}}).ok());
  EXPECT_FALSE((*client)->request("GET", "/x", "", {{"Bad Name", "v"}}).ok());
  EXPECT_EQ((*client)->stats().connections_opened, 0u);
}

}  // namespace
}  // namespace th::client
