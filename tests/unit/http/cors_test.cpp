#include "http/cors.h"

#include <gtest/gtest.h>

namespace th::http {
namespace {

HttpRequest with_origin(std::string method, std::string origin) {
  HttpRequest r;
  r.method = std::move(method);
  r.path = "/v1/models";
  if (!origin.empty()) r.headers.push_back({"origin", std::move(origin)});
  return r;
}

TEST(Cors, ParsesACommaSeparatedList) {
  EXPECT_EQ(parse_cors_origins(" https://a.example , https://b.example/,,"),
            (std::vector<std::string>{"https://a.example", "https://b.example"}));
  EXPECT_EQ(parse_cors_origins("*"), std::vector<std::string>{"*"});
  EXPECT_TRUE(parse_cors_origins("").empty());
}

TEST(Cors, AllowsOnlyListedOriginsAndStarAllowsAll) {
  const std::vector<std::string> list = {"https://a.example"};
  EXPECT_EQ(cors_allowed_origin(list, with_origin("GET", "https://a.example")), "https://a.example");
  EXPECT_FALSE(cors_allowed_origin(list, with_origin("GET", "https://a.example.evil")));
  EXPECT_FALSE(cors_allowed_origin(list, with_origin("GET", "")));
  EXPECT_FALSE(cors_allowed_origin({}, with_origin("GET", "https://a.example")));
  EXPECT_EQ(cors_allowed_origin({"*"}, with_origin("GET", "null")), "null");
}

TEST(Cors, PreflightIsOptionsWithARequestMethod) {
  HttpRequest r = with_origin("OPTIONS", "https://a.example");
  EXPECT_FALSE(is_cors_preflight(r));
  r.headers.push_back({"access-control-request-method", "POST"});
  EXPECT_TRUE(is_cors_preflight(r));
  EXPECT_EQ(cors_preflight_response("https://a.example").status, 204);
}

}  // namespace
}  // namespace th::http
