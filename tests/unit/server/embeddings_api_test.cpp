// POST /v1/embeddings' pure parts: the body's forms and refusals by name, L2
// normalization, base64 that decodes back to the same floats, and the answer's shape.
#include "server/embeddings_api.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace th::server {
namespace {

EmbeddingsRequest embeddings_ok(const std::string& body) {
  auto r = parse_embeddings_request(body);
  if (auto* e = std::get_if<http::ApiError>(&r)) ADD_FAILURE() << body << ": " << e->message;
  return std::holds_alternative<EmbeddingsRequest>(r) ? std::get<EmbeddingsRequest>(std::move(r)) : EmbeddingsRequest{};
}

void embeddings_refused(const std::string& body, const std::string& param, const std::string& words = "") {
  auto r = parse_embeddings_request(body);
  ASSERT_TRUE(std::holds_alternative<http::ApiError>(r)) << body;
  const http::ApiError& e = std::get<http::ApiError>(r);
  EXPECT_EQ(e.param.value_or(""), param) << e.message;
  EXPECT_NE(e.message.find(words), std::string::npos) << e.message;
}

TEST(EmbeddingsRequest, InputForms) {
  EmbeddingsRequest r = embeddings_ok(R"({"input":"hello","model":"m"})");
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].text, "hello");
  EXPECT_EQ(r.model, "m");
  EXPECT_FALSE(r.base64);
  EXPECT_EQ(embeddings_ok(R"({"input":["a","b","c"]})").inputs.size(), 3u);
  r = embeddings_ok(R"({"input":[1,2,3],"encoding_format":"base64"})");
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_TRUE(r.inputs[0].is_tokens);
  EXPECT_EQ(r.inputs[0].tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_TRUE(r.base64);
  r = embeddings_ok(R"({"input":[[1,2],[3]],"dimensions":64,"user":"u","encoding_format":"float"})");
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[1].tokens, std::vector<int32_t>{3});
  EXPECT_EQ(r.dimensions, 64);
}

TEST(EmbeddingsRequest, BadInputsAreRefusedByName) {
  embeddings_refused(R"({"model":"m"})", "input", "required");
  embeddings_refused(R"({"input":""})", "input", "empty");
  embeddings_refused(R"({"input":[]})", "input", "empty");
  embeddings_refused(R"({"input":5})", "input", "must be a string");
  embeddings_refused(R"({"input":["a",1]})", "input[1]", "must be a string");
  embeddings_refused(R"({"input":["a",""]})", "input[1]", "empty");
  embeddings_refused(R"({"input":[1,-2]})", "input[1]", "token id");
  embeddings_refused(R"({"input":[1,2.5]})", "input[1]", "token id");
  embeddings_refused(R"({"input":[[1],[]]})", "input[1]", "empty list of token ids");
  embeddings_refused(R"({"input":[[1],"a"]})", "input[1]", "array of token ids");
  embeddings_refused(R"({"input":[[1,"x"]]})", "input[0][1]", "token id");
  embeddings_refused(R"({"input":"a","encoding_format":"int8"})", "encoding_format", "\"base64\"");
  embeddings_refused(R"({"input":"a","dimensions":0})", "dimensions", "positive");
  embeddings_refused(R"({"input":"a","model":5})", "model", "string");
  embeddings_refused(R"({"input":"a","truncate_prompt_tokens":5})", "truncate_prompt_tokens", "refused");
  std::string many = R"({"input":[)";
  for (int i = 0; i <= 2048; ++i) many += std::string(i ? "," : "") + "\"x\"";
  embeddings_refused(many + "]}", "input", "at most 2048");
  auto deep = parse_embeddings_request(R"({"input":)" + std::string(100000, '[') + std::string(100000, ']') + "}");
  ASSERT_TRUE(std::holds_alternative<http::ApiError>(deep));
  EXPECT_NE(std::get<http::ApiError>(deep).message.find("nested deeper"), std::string::npos);
  ASSERT_TRUE(std::holds_alternative<http::ApiError>(parse_embeddings_request("[1]")));
  ASSERT_TRUE(std::holds_alternative<http::ApiError>(parse_embeddings_request("{")));
}

std::vector<float> decode_base64(const std::string& s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string bytes;
  for (size_t i = 0; i + 3 < s.size(); i += 4) {
    uint32_t x = 0;
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const int v = val(s[i + k]);
      pad += v < 0;
      x = (x << 6) | static_cast<uint32_t>(v < 0 ? 0 : v);
    }
    for (int k = 0; k < 3 - pad; ++k) bytes += static_cast<char>((x >> (16 - 8 * k)) & 0xFF);
  }
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);  // little-endian host
  return out;
}

TEST(EmbeddingsResponse, NormalizedAndBase64DecodesToTheSameFloats) {
  std::vector<float> v = {3, -4, 0, 1e-3f};
  l2_normalize(v);
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_NEAR(v[0], 0.6f, 1e-4);
  std::vector<float> zero = {0, 0};
  l2_normalize(zero);
  EXPECT_EQ(zero, (std::vector<float>{0, 0}));
  for (size_t n : {1, 2, 3, 5, 64}) {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = std::sin(static_cast<float>(i) + 0.5f) * 1e3f;
    const std::string b = base64_floats(x);
    EXPECT_EQ(b.size(), (n * 4 + 2) / 3 * 4);
    EXPECT_EQ(decode_base64(b), x) << b;
  }
  EXPECT_EQ(base64_floats({1.0f}), "AACAPw==");  // 1.0f = 00 00 80 3f, as Python's base64 of struct.pack('<f', 1)
  const auto body = embeddings_body({{0.6f, 0.8f}, {1, 0}}, false, "m", 7);
  EXPECT_EQ(body["object"], "list");
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["data"][1]["object"], "embedding");
  EXPECT_EQ(body["data"][1]["index"], 1);
  EXPECT_EQ(body["data"][0]["embedding"][1], 0.8f);
  EXPECT_EQ(body["usage"], nlohmann::ordered_json({{"prompt_tokens", 7}, {"total_tokens", 7}}));
  EXPECT_EQ(embeddings_body({{1.0f}}, true, "m", 1)["data"][0]["embedding"], "AACAPw==");
}

}  // namespace
}  // namespace th::server
