#include "http/http_router.h"

#include <gtest/gtest.h>

namespace th::http {
namespace {

HttpHandler tagged(int tag, int* out) {
  return [tag, out](const HttpRequest&, ResponseWriter) { *out = tag; };
}

TEST(HttpRouter, ExactPrefixNotFoundAndMethodNotAllowed) {
  int hit = 0;
  HttpRouter r;
  r.add("GET", "/v1/models", tagged(1, &hit));
  r.add("GET", "/v1/models/*", tagged(2, &hit));
  r.add("DELETE", "/v1/models/*", tagged(3, &hit));
  r.add("POST", "/v1/completions", tagged(4, &hit));
  r.add("GET", "/v1/*", tagged(5, &hit));

  auto call = [&](std::string_view method, std::string_view path) {
    hit = 0;
    HttpRouter::Match m = r.find(method, path);
    if (m.handler) (*m.handler)(HttpRequest(), ResponseWriter());
    return m.handler ? hit : -m.status;
  };
  EXPECT_EQ(call("GET", "/v1/models"), 1);
  EXPECT_EQ(call("GET", "/v1/models/llama"), 2);
  EXPECT_EQ(call("DELETE", "/v1/models/llama"), 3);
  EXPECT_EQ(call("POST", "/v1/completions"), 4);
  EXPECT_EQ(call("GET", "/v1/other"), 5);  // the longest prefix wins
  EXPECT_EQ(call("GET", "/v2"), -404);
  EXPECT_EQ(call("get", "/v1/models"), -405);  // methods are case-sensitive
  EXPECT_EQ(call("GET", "/v1/completions"), -405);
  EXPECT_EQ(r.find("GET", "/v1/completions").allow, "POST");
  EXPECT_EQ(r.find("PUT", "/v1/models/x").allow, "DELETE, GET");
}

}  // namespace
}  // namespace th::http
