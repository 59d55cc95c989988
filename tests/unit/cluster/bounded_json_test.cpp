#include "cluster/bounded_json.h"

#include <gtest/gtest.h>

#include <string>

namespace th::cluster {
namespace {

std::string nested(size_t depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

// {"a":{"a":...{}...}}: objects nested `depth` deep.
std::string nested_objects(size_t depth) {
  std::string s;
  for (size_t i = 0; i + 1 < depth; ++i) s += "{\"a\":";
  s += "{}";
  s += std::string(depth - 1, '}');
  return s;
}

TEST(BoundedJson, AcceptsUpToTheDepthAndRefusesOneMore) {
  const JsonLimits limits{8, 1 << 20};
  EXPECT_TRUE(parse_json_bounded(nested(8), limits).ok());
  EXPECT_TRUE(parse_json_bounded(nested_objects(8), limits).ok());
  Result<nlohmann::json> deep = parse_json_bounded(nested(9), limits);
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.message().find("deeper than 8"), std::string::npos) << deep.message();
  EXPECT_FALSE(parse_json_bounded(nested_objects(9), limits).ok());
  EXPECT_FALSE(parse_ordered_json_bounded(nested(9), limits).ok());
}

TEST(BoundedJson, BracketsInsideStringsDoNotCount) {
  const JsonLimits limits{2, 1 << 20};
  // 1000 '[' and an escaped quote inside a string: depth 2 all the same.
  const std::string s = "{\"a\":[\"" + std::string(1000, '[') + "\\\"{{{\"]}";
  Result<nlohmann::json> j = parse_json_bounded(s, limits);
  ASSERT_TRUE(j.ok()) << j.message();
  EXPECT_EQ((*j)["a"][0].get<std::string>().size(), 1004u);
  // A backslash that ends the string's content does not escape the closing quote.
  EXPECT_TRUE(parse_json_bounded(R"({"a":["x\\"]})", limits).ok());
  EXPECT_FALSE(parse_json_bounded(R"({"a":["x\\"],"b":[[1]]})", limits).ok());
}

TEST(BoundedJson, RefusesOversizedTextBeforeParsing) {
  const std::string s = "\"" + std::string(100, 'x') + "\"";
  EXPECT_TRUE(parse_json_bounded(s, JsonLimits{4, 102}).ok());
  Result<nlohmann::json> big = parse_json_bounded(s, JsonLimits{4, 101});
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.message().find("over the limit of 101"), std::string::npos) << big.message();
}

TEST(BoundedJson, InvalidJsonIsAnErrorNotAnException) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\":1} trailing", "// c\n1", "]]]]", "\"\\"})
    EXPECT_FALSE(parse_json_bounded(bad, kControlLimits).ok()) << bad;
  EXPECT_TRUE(parse_json_bounded("[1, {\"b\": null}]", kControlLimits).ok());
}

TEST(BoundedJson, MegabytesOfOpenBracketsCostOneScan) {
  // 200 KB of '[' (100,000 levels, #15's crash) and 16 MB of them: refused at the limit.
  for (size_t n : {size_t{200'000}, size_t{16u << 20}}) {
    const std::string s = "{\"prompt\":" + std::string(n, '[');
    EXPECT_FALSE(parse_json_bounded(s, JsonLimits{64, 64u << 20}).ok());
  }
  // Wide is fine: a million elements one level deep.
  std::string wide = "[";
  for (int i = 0; i < 1'000'000; ++i) wide += i ? ",0" : "0";
  wide += "]";
  Result<nlohmann::json> j = parse_json_bounded(wide, JsonLimits{1, 64u << 20});
  ASSERT_TRUE(j.ok()) << j.message();
  EXPECT_EQ(j->size(), 1'000'000u);
}

}  // namespace
}  // namespace th::cluster
