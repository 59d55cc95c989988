#include "server/api_request.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace th::server {
namespace {

constexpr ApiEndpoint kCompletions = ApiEndpoint::Completions;
constexpr ApiEndpoint kChat = ApiEndpoint::ChatCompletions;
constexpr ApiEndpoint kGenerate = ApiEndpoint::Generate;

// A minimal valid body for each endpoint plus `more` (members, comma-separated).
std::string completions(const std::string& more = "") {
  return R"({"model":"m","prompt":"hi")" + (more.empty() ? "" : "," + more) + "}";
}
std::string chat(const std::string& more = "") {
  return R"({"model":"m","messages":[{"role":"user","content":"hi"}])" + (more.empty() ? "" : "," + more) + "}";
}
std::string generate(const std::string& more = "") {
  return R"({"prompt":"hi")" + (more.empty() ? "" : "," + more) + "}";
}

void expect_one_line(const std::string& message) {
  EXPECT_FALSE(message.empty());
  EXPECT_LT(message.size(), 300u) << message;
  for (char c : message) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7F) << message;
}

ApiRequest parse_ok(ApiEndpoint e, const std::string& body, const ApiRequestLimits& limits = {}) {
  ApiParseResult r = parse_api_request(e, body, limits);
  if (const auto* err = std::get_if<http::ApiError>(&r)) {
    ADD_FAILURE() << "rejected " << body.substr(0, 200) << ": " << err->message;
    return {};
  }
  return std::get<ApiRequest>(std::move(r));
}

http::ApiError parse_err(ApiEndpoint e, const std::string& body, const ApiRequestLimits& limits = {}) {
  ApiParseResult r = parse_api_request(e, body, limits);
  if (!std::holds_alternative<http::ApiError>(r)) {
    ADD_FAILURE() << "accepted " << body.substr(0, 200);
    return {};
  }
  http::ApiError err = std::get<http::ApiError>(std::move(r));
  expect_one_line(err.message);
  EXPECT_TRUE(err.type.empty());  // the default for 400: invalid_request_error
  return err;
}

// The body is rejected with `param` named (std::nullopt: none) and, when
// given, `words` somewhere in the message.
void expect_rejected(ApiEndpoint e, const std::string& body, std::optional<std::string> param,
                     const std::string& words = "") {
  SCOPED_TRACE(body.substr(0, 200));
  const http::ApiError err = parse_err(e, body);
  EXPECT_EQ(err.param, param) << err.message;
  if (!words.empty()) {
    EXPECT_NE(err.message.find(words), std::string::npos) << err.message;
  }
}

// ---- defaults ----

TEST(ApiRequestDefaults, CompletionsAreOpenAis) {
  const ApiRequest r = parse_ok(kCompletions, completions());
  EXPECT_EQ(r.endpoint, kCompletions);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_FALSE(r.prompts[0].is_tokens);
  EXPECT_EQ(r.prompts[0].text, "hi");
  EXPECT_EQ(r.max_tokens, -1);
  EXPECT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_EQ(r.sampling.min_p, 0.0f);
  EXPECT_EQ(r.sampling.presence_penalty, 0.0f);
  EXPECT_EQ(r.sampling.frequency_penalty, 0.0f);
  EXPECT_EQ(r.sampling.repeat_penalty, 1.0f);
  EXPECT_FALSE(r.seed_given);
  EXPECT_TRUE(r.sampling.validate().ok());
  EXPECT_TRUE(r.stop.empty());
  EXPECT_TRUE(r.stop_token_ids.empty());
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_EQ(r.logprobs, -1);
  EXPECT_FALSE(r.echo);
  EXPECT_EQ(r.user, "");
  EXPECT_FALSE(r.ignore_eos);
  EXPECT_EQ(r.priority, 0);
  EXPECT_EQ(r.compute_type, ComputeType::Auto);
  EXPECT_FALSE(r.return_token_ids);
  EXPECT_TRUE(r.messages.is_null());
}

TEST(ApiRequestDefaults, ChatAndGenerate) {
  const ApiRequest c = parse_ok(kChat, chat());
  EXPECT_EQ(c.endpoint, kChat);
  EXPECT_TRUE(c.add_generation_prompt);
  EXPECT_TRUE(c.prompts.empty());
  EXPECT_EQ(c.logprobs, -1);
  EXPECT_FALSE(c.return_token_ids);
  EXPECT_EQ(c.sampling.temperature, 1.0f);

  const ApiRequest g = parse_ok(kGenerate, generate());
  EXPECT_EQ(g.endpoint, kGenerate);
  EXPECT_EQ(g.model, "");
  EXPECT_TRUE(g.return_token_ids);
  EXPECT_FALSE(parse_ok(kGenerate, generate(R"("return_token_ids":false)")).return_token_ids);
  EXPECT_TRUE(parse_ok(kCompletions, completions(R"("return_token_ids":true)")).return_token_ids);
  EXPECT_TRUE(parse_ok(kChat, chat(R"("return_token_ids":true)")).return_token_ids);
}

TEST(ApiRequestDefaults, NullMeansAbsent) {
  const std::string nulls =
      R"("max_tokens":null,"temperature":null,"top_p":null,"top_k":null,"min_p":null,"presence_penalty":null,)"
      R"("frequency_penalty":null,"repetition_penalty":null,"seed":null,"stop":null,"stop_token_ids":null,)"
      R"("n":null,"stream":null,"stream_options":null,"logprobs":null,"echo":null,"user":null,)"
      R"("ignore_eos":null,"priority":null,"compute_type":null,"return_token_ids":null,"logit_bias":null,)"
      R"("suffix":null,"best_of":null,"tools":null,"tool_choice":null,"functions":null,"function_call":null,)"
      R"("response_format":null,"guided_json":null,"top_logprobs":null,"max_completion_tokens":null,)"
      R"("add_generation_prompt":null)";
  const ApiRequest a = parse_ok(kCompletions, completions(nulls));
  EXPECT_EQ(a.max_tokens, -1);
  EXPECT_EQ(a.sampling.temperature, 1.0f);
  EXPECT_EQ(a.n, 1);
  EXPECT_FALSE(a.seed_given);
  const ApiRequest c = parse_ok(kChat, chat(nulls));
  EXPECT_TRUE(c.add_generation_prompt);
  EXPECT_EQ(c.logprobs, -1);
  const ApiRequest g = parse_ok(kGenerate, generate(nulls + R"(,"model":null)"));
  EXPECT_TRUE(g.return_token_ids);
}

// Nothing is silently ignored (request_fields_test.cpp walks the three projects' fields).
TEST(ApiRequestDefaults, UnknownFieldsAreRefusedByName) {
  expect_rejected(kCompletions, completions(R"("frobnicate":{"x":[1,2]})"), "frobnicate", "/v1/completions");
  // A chat-only field on completions, a completions-only one on chat.
  expect_rejected(kCompletions, completions(R"("max_completion_tokens":5)"), "max_completion_tokens");
  expect_rejected(kChat, chat(R"("suffix":"x")"), "suffix", "/v1/chat/completions");
}

// ---- the body ----

TEST(ApiRequestBody, MustBeAJsonObject) {
  for (const char* body : {"[]", "1", "\"x\"", "null", "true", "[{\"model\":\"m\"}]"})
    expect_rejected(kCompletions, body, std::nullopt, "must be a JSON object");
  const std::vector<std::pair<std::string, std::optional<std::string>>> bad = {
      {"{", std::nullopt}, {"{\"model\":\"m\",}", std::nullopt},
      {"{'model':'m'}", std::nullopt}, {"{\"model\":\"m\"} x", std::nullopt}, {"{\"model\":\"m\"}{}", std::nullopt},
      {"\x01", std::nullopt}, {"{\"a\":01}", std::nullopt},
      // Inside a member, the member is the param.
      {"{\"a\":tru}", "a"}, {"{\"a\":NaN}", "a"}, {"{\"a\":Infinity}", "a"}, {"{\"a\":-}", "a"},
      {"{\"a\":\"\x01\"}", "a"}, {"{\"a\":\"x\\q\"}", "a"}, {"{\"a\":[1,{\"b\":[tru]}]}", "a[1].b[0]"},
      {"{\"model\":\"m\"\n,\n\"a\":[1,2,]}", "a[2]"}};
  for (const auto& [body, param] : bad) expect_rejected(kCompletions, body, param, "invalid JSON at byte ");
  for (const char* body : {"", " ", "\r\n\t "}) expect_rejected(kChat, body, std::nullopt, "the request body is empty");
}

TEST(ApiRequestBody, ParseErrorsNameTheField) {
  // A number too large for a double is a parse error, but still names the field.
  expect_rejected(kCompletions, completions(R"("max_tokens":1e400)"), "max_tokens", "number out of range");
  expect_rejected(kChat, R"({"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b)",
                  "messages[1].content", "invalid JSON");
  expect_rejected(kCompletions, R"({"model":"m","prompt":["a", tru]})", "prompt[1]", "invalid JSON");
}

TEST(ApiRequestBody, InvalidUtf8IsACleanError) {
  const std::vector<std::string> bad = {"\xff", "\xc3", "\xc3(", "\xe2\x82", "\xed\xa0\x80" /* surrogate */,
                                        "\xf8\x88\x80\x80\x80", "\xc0\xaf" /* overlong */, "\xf4\x90\x80\x80"};
  for (const std::string& b : bad) {
    expect_rejected(kChat, R"({"model":"m","messages":[{"role":"user","content":"ok )" + b + R"("}]})",
                    "messages[0].content", "ill-formed UTF-8");
    expect_rejected(kCompletions, "{\"model\":\"m\",\"prompt\":\"x\"," + b + "}", std::nullopt, "invalid JSON");
  }
  // Escaped surrogates: a pair is one character, a lone one is an error.
  EXPECT_EQ(parse_ok(kCompletions, R"({"model":"m","prompt":"\ud83d\ude00"})").prompts[0].text, "\xf0\x9f\x98\x80");
  expect_rejected(kCompletions, R"({"model":"m","prompt":"\ud800"})", "prompt", "surrogate");
  expect_rejected(kCompletions, R"({"model":"m","prompt":"\udc00x"})", "prompt", "surrogate");
  // Valid multi-byte text passes through as is.
  EXPECT_EQ(parse_ok(kCompletions, R"({"model":"m","prompt":"héllo wörld 日本"})").prompts[0].text, "héllo wörld 日本");
}

TEST(ApiRequestBody, NestingDepthIsLimitedBeforeTheDomExists) {
  auto nested = [](size_t depth) {
    std::string inner = std::string(depth - 1, '[') + std::string(depth - 1, ']');
    return R"({"model":"m","prompt":"x","extra":)" + inner + "}";
  };
  // The body object is level 1: 64 levels in all pass, 65 do not.
  expect_rejected(kCompletions, nested(64), "extra", "not a field");  // parsed; then refused by name
  expect_rejected(kCompletions, nested(65), std::nullopt, "deeper than 64");
  ApiRequestLimits shallow;
  shallow.max_depth = 2;
  EXPECT_FALSE(std::holds_alternative<ApiRequest>(parse_api_request(kChat, chat(), shallow)));
  shallow.max_depth = 3;  // the body, messages, a message (its content is a string)
  EXPECT_TRUE(std::holds_alternative<ApiRequest>(parse_api_request(kChat, chat(), shallow)));

  // A million '[' (or object openings) cost a moment and no stack.
  const auto t0 = std::chrono::steady_clock::now();
  expect_rejected(kCompletions, std::string(1'000'000, '['), std::nullopt, "deeper than 64");
  std::string objects;
  for (int i = 0; i < 200'000; ++i) objects += "{\"a\":";
  expect_rejected(kCompletions, objects, std::nullopt, "deeper than 64");
  expect_rejected(kCompletions, "{\"x\":" + std::string(1'000'000, '[') + std::string(1'000'000, ']') + "}",
                  std::nullopt, "deeper than 64");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(ApiRequestBody, HugeStringsAndObjects) {
  const std::string big(8 << 20, 'a');
  const ApiRequest r = parse_ok(kCompletions, R"({"model":"m","prompt":")" + big + "\"}");
  EXPECT_EQ(r.prompts[0].text.size(), big.size());
  // A huge string where a short one belongs is refused without echoing it.
  const http::ApiError e = parse_err(kCompletions, completions(R"("model":")" + big + "\""));
  EXPECT_EQ(e.param, "model");
  expect_rejected(kCompletions, completions(R"("priority":")" + big + "\""), "priority");
  expect_rejected(kChat, R"({"model":"m","messages":[{"role":")" + big + R"(","content":"x"}]})", "messages[0].role");
  // An object with 200k members parses in linear time (ordered_json's own
  // insert is a linear search per key: quadratic here).
  std::string many = R"({"model":"m","prompt":"x")";
  for (int i = 0; i < 200'000; ++i) many += ",\"k" + std::to_string(i) + "\":" + std::to_string(i);
  many += "}";
  const auto t0 = std::chrono::steady_clock::now();
  expect_rejected(kCompletions, many, "k0", "(also k1, k10, k100, ...)");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(ApiRequestBody, DuplicateKeysLastWinsInFirstPosition) {
  EXPECT_EQ(parse_ok(kCompletions, R"({"model":"m","prompt":"a","max_tokens":3,"max_tokens":7})").max_tokens, 7);
  // Past the linear-search size too.
  std::string body = R"({"model":"m","prompt":"a","max_tokens":3)";
  for (int i = 0; i < 20; ++i) body += ",\"k" + std::to_string(i) + "\":null";  // null: absent (else refused)
  EXPECT_EQ(parse_ok(kCompletions, body + R"(,"max_tokens":9})").max_tokens, 9);
  const ApiRequest c = parse_ok(kChat, R"({"model":"m","messages":[{"role":"user","name":"a","content":"x","name":"b"}]})");
  ASSERT_EQ(c.messages[0].size(), 3u);
  EXPECT_EQ(c.messages[0].begin().key(), "role");
  EXPECT_EQ((++c.messages[0].begin()).key(), "name");
  EXPECT_EQ(c.messages[0]["name"], "b");
}

// ---- model ----

TEST(ApiRequestModel, OptionalAsInVllmAndLlamaCpp) {
  EXPECT_EQ(parse_ok(kCompletions, R"({"prompt":"x"})").model, "");
  EXPECT_EQ(parse_ok(kCompletions, R"({"model":"","prompt":"x"})").model, "");
  EXPECT_EQ(parse_ok(kChat, R"({"messages":[{"role":"user","content":"x"}]})").model, "");
  EXPECT_EQ(parse_ok(kCompletions, R"({"model":null,"prompt":"x"})").model, "");
  expect_rejected(kCompletions, R"({"model":7,"prompt":"x"})", "model", "must be a string");
  expect_rejected(kGenerate, R"({"model":["m"],"prompt":"x"})", "model", "must be a string");
  expect_rejected(kCompletions, R"({"model":")" + std::string(257, 'm') + R"(","prompt":"x"})", "model", "256");
  EXPECT_EQ(parse_ok(kCompletions, R"({"model":")" + std::string(256, 'm') + R"(","prompt":"x"})").model.size(), 256u);
  EXPECT_EQ(parse_ok(kGenerate, R"({"model":"tiny","prompt":"x"})").model, "tiny");
}

// ---- prompts ----

TEST(ApiRequestPrompt, EachForm) {
  const ApiRequest s = parse_ok(kCompletions, R"({"model":"m","prompt":""})");
  ASSERT_EQ(s.prompts.size(), 1u);
  EXPECT_EQ(s.prompts[0].text, "");
  EXPECT_FALSE(s.prompts[0].is_tokens);

  const ApiRequest list = parse_ok(kCompletions, R"({"model":"m","prompt":["a","","c"]})");
  ASSERT_EQ(list.prompts.size(), 3u);
  EXPECT_EQ(list.prompts[2].text, "c");
  EXPECT_EQ(list.prompts[1].text, "");

  const ApiRequest ids = parse_ok(kCompletions, R"({"model":"m","prompt":[1,0,2147483647]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_TRUE(ids.prompts[0].is_tokens);
  EXPECT_EQ(ids.prompts[0].tokens, (std::vector<int32_t>{1, 0, 2147483647}));

  const ApiRequest lists = parse_ok(kCompletions, R"({"model":"m","prompt":[[1,2],[3]]})");
  ASSERT_EQ(lists.prompts.size(), 2u);
  EXPECT_EQ(lists.prompts[0].tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(lists.prompts[1].tokens, (std::vector<int32_t>{3}));
}

TEST(ApiRequestPrompt, Invalid) {
  auto p = [](const std::string& prompt) { return R"({"model":"m","prompt":)" + prompt + "}"; };
  expect_rejected(kCompletions, R"({"model":"m"})", "prompt", "required");
  expect_rejected(kCompletions, p("null"), "prompt", "required");
  expect_rejected(kCompletions, p("[]"), "prompt", "empty");
  expect_rejected(kCompletions, p("5"), "prompt", "must be a string");
  expect_rejected(kCompletions, p("{}"), "prompt", "got an object");
  expect_rejected(kCompletions, p("[true]"), "prompt[0]");
  expect_rejected(kCompletions, p("[null]"), "prompt[0]");
  expect_rejected(kCompletions, p(R"(["a",1])"), "prompt[1]", "must be a string");
  expect_rejected(kCompletions, p(R"(["a",null])"), "prompt[1]", "must be a string");
  expect_rejected(kCompletions, p(R"([1,"a"])"), "prompt[1]", "token id");
  expect_rejected(kCompletions, p("[1,-1]"), "prompt[1]", "from 0 to 2147483647");
  expect_rejected(kCompletions, p("[2147483648]"), "prompt[0]", "from 0 to 2147483647");
  expect_rejected(kCompletions, p("[1.5]"), "prompt[0]", "got 1.5");
  expect_rejected(kCompletions, p("[1.0]"), "prompt[0]", "token id");
  expect_rejected(kCompletions, p("[18446744073709551615]"), "prompt[0]");
  expect_rejected(kCompletions, p("[[1],[]]"), "prompt[1]", "empty");
  expect_rejected(kCompletions, p("[[1],[2,-3]]"), "prompt[1][1]", "token id");
  expect_rejected(kCompletions, p("[[1],2]"), "prompt[1]", "array of token ids");
  expect_rejected(kCompletions, p(R"([[1],["a"]])"), "prompt[1][0]", "token id");
  expect_rejected(kCompletions, p("[[[1]]]"), "prompt[0][0]", "token id");
}

TEST(ApiRequestPrompt, AtMostMaxPrompts) {
  ApiRequestLimits limits;
  limits.max_prompts = 3;
  EXPECT_EQ(parse_ok(kCompletions, R"({"model":"m","prompt":["a","b","c"]})", limits).prompts.size(), 3u);
  EXPECT_EQ(parse_ok(kCompletions, R"({"model":"m","prompt":[1,2,3,4,5]})", limits).prompts.size(), 1u);
  const http::ApiError e = parse_err(kCompletions, R"({"model":"m","prompt":["a","b","c","d"]})", limits);
  EXPECT_EQ(e.param, "prompt");
  EXPECT_EQ(parse_err(kCompletions, R"({"model":"m","prompt":[[1],[2],[3],[4]]})", limits).param, "prompt");
}

TEST(ApiRequestPrompt, GenerateTakesOnePrompt) {
  const ApiRequest t = parse_ok(kGenerate, R"({"prompt":[5,6]})");
  ASSERT_EQ(t.prompts.size(), 1u);
  EXPECT_EQ(t.prompts[0].tokens, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(parse_ok(kGenerate, R"({"prompt":""})").prompts[0].text, "");
  expect_rejected(kGenerate, R"({"prompt":["a","b"]})", "prompt[0]", "one prompt");
  expect_rejected(kGenerate, R"({"prompt":[[1]]})", "prompt[0]", "one prompt");
  expect_rejected(kGenerate, R"({"prompt":[]})", "prompt", "empty");
  expect_rejected(kGenerate, R"({})", "prompt", "required");
  expect_rejected(kGenerate, R"({"prompt":[1,-2]})", "prompt[1]", "token id");
  // The completions fields work there too.
  const ApiRequest g = parse_ok(kGenerate, generate(R"("max_tokens":5,"logprobs":2,"echo":true,"stop":"x")"));
  EXPECT_EQ(g.max_tokens, 5);
  EXPECT_EQ(g.logprobs, 2);
  EXPECT_TRUE(g.echo);
  EXPECT_EQ(g.stop, (std::vector<std::string>{"x"}));
}

// ---- chat messages ----

TEST(ApiRequestChat, ContentPartsAreJoinedAndOtherKeysKept) {
  const ApiRequest r = parse_ok(kChat, R"({"model":"m","messages":[
      {"role":"system","content":[{"type":"text","text":"You are "},{"type":"text","text":"terse."}]},
      {"role":"user","content":"hi","name":"bob"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
      {"role":"tool","tool_call_id":"c1","content":[]},
      {"role":"developer","content":"dev"},
      {"role":"function","name":"f","content":"out"},
      {"role":"assistant"}],
      "add_generation_prompt":false})");
  ASSERT_TRUE(r.messages.is_array());
  ASSERT_EQ(r.messages.size(), 7u);
  EXPECT_EQ(r.messages[0]["content"], "You are terse.");
  EXPECT_EQ(r.messages[1]["content"], "hi");
  EXPECT_EQ(r.messages[1]["name"], "bob");
  EXPECT_TRUE(r.messages[2]["content"].is_null());
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(r.messages[3]["content"], "");
  EXPECT_EQ(r.messages[3]["tool_call_id"], "c1");
  EXPECT_FALSE(r.messages[6].contains("content"));
  EXPECT_FALSE(r.add_generation_prompt);
  // Key order as sent (templates iterate and tojson them).
  EXPECT_EQ(r.messages[3].dump(), R"({"role":"tool","tool_call_id":"c1","content":""})");
}

TEST(ApiRequestChat, InvalidMessages) {
  auto m = [](const std::string& messages) { return R"({"model":"m","messages":)" + messages + "}"; };
  expect_rejected(kChat, R"({"model":"m"})", "messages", "required");
  expect_rejected(kChat, m("null"), "messages", "required");
  expect_rejected(kChat, m("[]"), "messages", "empty");
  expect_rejected(kChat, m(R"({"role":"user"})"), "messages", "must be an array");
  expect_rejected(kChat, m(R"(["hi"])"), "messages[0]", "must be an object");
  expect_rejected(kChat, m(R"([{"role":"user","content":"a"},{"content":"b"}])"), "messages[1].role", "required");
  expect_rejected(kChat, m(R"([{"role":null,"content":"b"}])"), "messages[0].role", "required");
  expect_rejected(kChat, m(R"([{"role":"robot","content":"b"}])"), "messages[0].role", "got \"robot\"");
  expect_rejected(kChat, m(R"([{"role":"User","content":"b"}])"), "messages[0].role", "one of system, user");
  expect_rejected(kChat, m(R"([{"role":1,"content":"b"}])"), "messages[0].role");
  expect_rejected(kChat, m(R"([{"role":"user","content":5}])"), "messages[0].content", "must be a string, null or");
  expect_rejected(kChat, m(R"([{"role":"user","content":{"type":"text","text":"x"}}])"), "messages[0].content");
  expect_rejected(kChat, m(R"([{"role":"user","content":["x"]}])"), "messages[0].content[0]", "must be an object");
  expect_rejected(kChat, m(R"([{"role":"user","content":[{"text":"x"}]}])"), "messages[0].content[0].type");
  expect_rejected(kChat, m(R"([{"role":"user","content":[{"type":"text"}]}])"), "messages[0].content[0].text");
  expect_rejected(kChat, m(R"([{"role":"user","content":[{"type":"text","text":null}]}])"),
                  "messages[0].content[0].text");
  expect_rejected(kChat, m(R"([{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"http://x/y.png"}}]}])"),
                  "messages[0].content[1].type", "\"image_url\" is not supported");
  expect_rejected(kChat, m(R"([{"role":"user","content":"a"},{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"","format":"wav"}}]}])"),
                  "messages[1].content[0].type", "not supported");
  // A long or control-character type is cut and cleaned in the message.
  expect_rejected(kChat, m(R"([{"role":"user","content":[{"type":")" + std::string(5000, 'z') + R"(\n"}]}])"),
                  "messages[0].content[0].type", "not supported");
  expect_rejected(kChat, m(R"([{"role":"user","content":[{"type":"a\nb\u0000"}]}])"), "messages[0].content[0].type");
  expect_rejected(kChat, chat(R"("add_generation_prompt":"yes")"), "add_generation_prompt", "true or false");
}

TEST(ApiRequestChat, AtMostMaxMessages) {
  ApiRequestLimits limits;
  limits.max_messages = 2;
  const std::string msg = R"({"role":"user","content":"x"})";
  EXPECT_EQ(parse_ok(kChat, R"({"model":"m","messages":[)" + msg + "," + msg + "]}", limits).messages.size(), 2u);
  EXPECT_EQ(parse_err(kChat, R"({"model":"m","messages":[)" + msg + "," + msg + "," + msg + "]}", limits).param,
            "messages");
}

// ---- max_tokens ----

TEST(ApiRequestMaxTokens, Range) {
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("max_tokens":1)")).max_tokens, 1);
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("max_tokens":1048576)")).max_tokens, 1 << 20);
  for (const char* bad : {"-1", "0", "1.5", "5.0", "1e2", "\"5\"", "true", "[5]", "1048577", "1180591620717411303424",
                          "-9223372036854775809", "18446744073709551615"}) {
    expect_rejected(kCompletions, completions(std::string(R"("max_tokens":)") + bad), "max_tokens",
                    "must be an integer from 1 to 1048576");
    expect_rejected(kChat, chat(std::string(R"("max_tokens":)") + bad), "max_tokens");
  }
  ApiRequestLimits small;
  small.max_tokens = 10;
  EXPECT_EQ(parse_err(kCompletions, completions(R"("max_tokens":11)"), small).param, "max_tokens");
}

TEST(ApiRequestMaxTokens, ChatAlias) {
  EXPECT_EQ(parse_ok(kChat, chat(R"("max_completion_tokens":7)")).max_tokens, 7);
  EXPECT_EQ(parse_ok(kChat, chat(R"("max_completion_tokens":7,"max_tokens":7)")).max_tokens, 7);
  EXPECT_EQ(parse_ok(kChat, chat(R"("max_completion_tokens":null,"max_tokens":4)")).max_tokens, 4);
  expect_rejected(kChat, chat(R"("max_completion_tokens":7,"max_tokens":8)"), "max_completion_tokens", "max_tokens");
  expect_rejected(kChat, chat(R"("max_completion_tokens":0)"), "max_completion_tokens", "from 1 to");
  expect_rejected(kChat, chat(R"("max_completion_tokens":2.5)"), "max_completion_tokens");
}

// ---- sampling ----

struct RangeCase {
  const char* field;
  std::vector<const char*> good;
  std::vector<const char*> bad;
};

TEST(ApiRequestSampling, Ranges) {
  const std::vector<RangeCase> cases = {
      {"temperature", {"0", "0.0", "1", "2", "0.7", "1.99"}, {"-0.1", "2.01", "\"1\"", "true", "1e400", "[1]"}},
      {"top_p", {"1", "0.5", "1e-30", "0.0001"}, {"0", "0.0", "-0.5", "1.01", "1e-50", "\"0.5\""}},
      {"top_k", {"-1", "0", "1", "40", "2147483647"}, {"-2", "1.5", "40.0", "2147483648", "\"40\""}},
      {"min_p", {"0", "1", "0.05"}, {"-0.01", "1.5", "false"}},
      {"presence_penalty", {"-2", "2", "0", "1.5"}, {"-2.01", "2.01", "\"0\""}},
      {"frequency_penalty", {"-2", "2", "0.5"}, {"-3", "3", "{}"}},
      {"repetition_penalty", {"1", "2", "0.5", "0.01"}, {"0", "-1", "2.5", "1e-60"}},
  };
  for (const RangeCase& c : cases) {
    for (const char* v : c.good) {
      SCOPED_TRACE(std::string(c.field) + "=" + v);
      const ApiRequest r = parse_ok(kCompletions, completions(cat("\"", c.field, "\":", v)));
      EXPECT_TRUE(r.sampling.validate().ok()) << r.sampling.validate().message();
    }
    for (const char* v : c.bad) expect_rejected(kCompletions, completions(cat("\"", c.field, "\":", v)), c.field);
  }
  const ApiRequest r = parse_ok(kChat, chat(R"("temperature":0,"top_p":0.9,"top_k":-1,"min_p":0.1,)"
                                            R"("presence_penalty":-1.5,"frequency_penalty":1.25,"repetition_penalty":1.1)"));
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_TRUE(r.sampling.greedy());
  EXPECT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 0);  // -1 is off
  EXPECT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_EQ(r.sampling.presence_penalty, -1.5f);
  EXPECT_EQ(r.sampling.frequency_penalty, 1.25f);
  EXPECT_EQ(r.sampling.repeat_penalty, 1.1f);
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("top_k":50)")).sampling.top_k, 50);
  // Messages say what is allowed.
  EXPECT_EQ(parse_err(kCompletions, completions(R"("temperature":3)")).message,
            "temperature must be a number from 0 to 2, got 3");
  EXPECT_EQ(parse_err(kCompletions, completions(R"("top_p":0)")).message,
            "top_p must be a number greater than 0 and at most 1, got 0");
}

TEST(ApiRequestSampling, Seed) {
  const ApiRequest a = parse_ok(kCompletions, completions(R"("seed":42)"));
  EXPECT_TRUE(a.seed_given);
  EXPECT_EQ(a.sampling.seed, 42u);
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("seed":-1)")).sampling.seed, ~uint64_t{0});
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("seed":0)")).sampling.seed, 0u);
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("seed":9223372036854775807)")).sampling.seed, (uint64_t{1} << 63) - 1);
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("seed":-9223372036854775808)")).sampling.seed, uint64_t{1} << 63);
  for (const char* bad : {"9223372036854775808", "18446744073709551615", "1e30", "4.2", "\"42\"", "true"})
    expect_rejected(kCompletions, completions(std::string(R"("seed":)") + bad), "seed", "64 signed bits");
}

// ---- stops ----

TEST(ApiRequestStop, StringsAndTokenIds) {
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("stop":"\n")")).stop, (std::vector<std::string>{"\n"}));
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("stop":["a","bc","d","e"])")).stop,
            (std::vector<std::string>{"a", "bc", "d", "e"}));
  EXPECT_TRUE(parse_ok(kChat, chat(R"("stop":[])")).stop.empty());
  const std::string max_stop(256, 's');
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("stop":")" + max_stop + "\"")).stop[0], max_stop);
  expect_rejected(kCompletions, completions(R"("stop":"")"), "stop", "empty");
  expect_rejected(kCompletions, completions(R"("stop":["a",""])"), "stop[1]", "empty");
  expect_rejected(kCompletions, completions(R"("stop":["a",7])"), "stop[1]", "must be a string");
  expect_rejected(kCompletions, completions(R"("stop":["a",null])"), "stop[1]", "must be a string");
  expect_rejected(kCompletions, completions(R"("stop":["a","b","c","d","e"])"), "stop", "at most 4");
  expect_rejected(kChat, chat(R"("stop":")" + max_stop + "s\""), "stop", "at most 256 bytes");
  expect_rejected(kChat, chat(R"("stop":["x",")" + max_stop + "s\"]"), "stop[1]", "at most 256 bytes");
  expect_rejected(kCompletions, completions(R"("stop":5)"), "stop", "string or an array of strings");
  expect_rejected(kCompletions, completions(R"("stop":{"a":1})"), "stop");

  EXPECT_EQ(parse_ok(kCompletions, completions(R"("stop_token_ids":[0,2,2147483647])")).stop_token_ids,
            (std::vector<int32_t>{0, 2, 2147483647}));
  EXPECT_TRUE(parse_ok(kCompletions, completions(R"("stop_token_ids":[])")).stop_token_ids.empty());
  expect_rejected(kCompletions, completions(R"("stop_token_ids":[1,-1])"), "stop_token_ids[1]", "token id");
  expect_rejected(kCompletions, completions(R"("stop_token_ids":[1.5])"), "stop_token_ids[0]");
  expect_rejected(kCompletions, completions(R"("stop_token_ids":["2"])"), "stop_token_ids[0]");
  expect_rejected(kCompletions, completions(R"("stop_token_ids":2)"), "stop_token_ids", "array");
  ApiRequestLimits limits;
  limits.max_stop_token_ids = 2;
  EXPECT_EQ(parse_err(kCompletions, completions(R"("stop_token_ids":[1,2,3])"), limits).param, "stop_token_ids");
}

// ---- choices, streaming, logprobs ----

TEST(ApiRequestChoices, NAndStream) {
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("n":16)")).n, 16);
  for (const char* bad : {"0", "-1", "17", "2.0", "\"2\""})
    expect_rejected(kCompletions, completions(std::string(R"("n":)") + bad), "n", "from 1 to 16");
  EXPECT_TRUE(parse_ok(kChat, chat(R"("stream":true)")).stream);
  expect_rejected(kChat, chat(R"("stream":1)"), "stream", "true or false");
  expect_rejected(kChat, chat(R"("stream":"true")"), "stream");

  const ApiRequest s = parse_ok(kChat, chat(R"("stream":true,"stream_options":{"include_usage":true})"));
  EXPECT_TRUE(s.include_usage);
  EXPECT_FALSE(parse_ok(kChat, chat(R"("stream":true,"stream_options":{})")).include_usage);
  EXPECT_FALSE(parse_ok(kChat, chat(R"("stream":true,"stream_options":{"include_usage":null})")).include_usage);
  EXPECT_FALSE(parse_ok(kChat, chat(R"("stream":false,"stream_options":null)")).include_usage);
  expect_rejected(kChat, chat(R"("stream_options":{"include_usage":true})"), "stream_options", "only allowed when stream is true");
  expect_rejected(kCompletions, completions(R"("stream":false,"stream_options":{"include_usage":true})"), "stream_options");
  expect_rejected(kChat, chat(R"("stream":true,"stream_options":true)"), "stream_options", "must be an object");
  expect_rejected(kChat, chat(R"("stream":true,"stream_options":{"include_usage":"yes"})"),
                  "stream_options.include_usage", "true or false");
}

TEST(ApiRequestLogprobs, CompletionsTakeACount) {
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("logprobs":0)")).logprobs, 0);
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("logprobs":20)")).logprobs, 20);
  for (const char* bad : {"-1", "21", "true", "1.5"})
    expect_rejected(kCompletions, completions(std::string(R"("logprobs":)") + bad), "logprobs", "from 0 to 20");
  EXPECT_TRUE(parse_ok(kCompletions, completions(R"("echo":true)")).echo);
  expect_rejected(kCompletions, completions(R"("echo":"true")"), "echo");
}

TEST(ApiRequestLogprobs, ChatTakesAFlagAndTopLogprobs) {
  EXPECT_EQ(parse_ok(kChat, chat(R"("logprobs":false)")).logprobs, -1);
  EXPECT_EQ(parse_ok(kChat, chat(R"("logprobs":true)")).logprobs, 0);
  EXPECT_EQ(parse_ok(kChat, chat(R"("logprobs":true,"top_logprobs":5)")).logprobs, 5);
  EXPECT_EQ(parse_ok(kChat, chat(R"("logprobs":true,"top_logprobs":0)")).logprobs, 0);
  EXPECT_EQ(parse_ok(kChat, chat(R"("logprobs":false,"top_logprobs":null)")).logprobs, -1);
  expect_rejected(kChat, chat(R"("logprobs":3)"), "logprobs", "true or false");
  expect_rejected(kChat, chat(R"("top_logprobs":3)"), "top_logprobs", "\"logprobs\": true");
  expect_rejected(kChat, chat(R"("logprobs":false,"top_logprobs":0)"), "top_logprobs");
  expect_rejected(kChat, chat(R"("logprobs":true,"top_logprobs":21)"), "top_logprobs", "from 0 to 20");
  expect_rejected(kChat, chat(R"("logprobs":true,"top_logprobs":-1)"), "top_logprobs");
}

// ---- extensions ----

TEST(ApiRequestExtensions, UserIgnoreEosPriorityComputeType) {
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("user":"u-1")")).user, "u-1");
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("user":")" + std::string(256, 'u') + "\"")).user.size(), 256u);
  expect_rejected(kCompletions, completions(R"("user":")" + std::string(257, 'u') + "\""), "user", "256 bytes");
  expect_rejected(kCompletions, completions(R"("user":12)"), "user", "must be a string");

  EXPECT_TRUE(parse_ok(kCompletions, completions(R"("ignore_eos":true)")).ignore_eos);
  expect_rejected(kCompletions, completions(R"("ignore_eos":1)"), "ignore_eos");

  EXPECT_EQ(parse_ok(kCompletions, completions(R"("priority":"high")")).priority, -1);
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("priority":"normal")")).priority, 0);
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("priority":"low")")).priority, 1);
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("priority":-2147483648)")).priority, INT32_MIN);
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("priority":2147483647)")).priority, INT32_MAX);
  EXPECT_EQ(parse_ok(kChat, chat(R"("priority":5)")).priority, 5);
  for (const char* bad : {"\"urgent\"", "\"HIGH\"", "2147483648", "-2147483649", "1.5", "true"})
    expect_rejected(kCompletions, completions(std::string(R"("priority":)") + bad), "priority", "\"high\", \"normal\"");

  EXPECT_EQ(parse_ok(kCompletions, completions(R"("compute_type":"fp32")")).compute_type, ComputeType::Fp32);
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("compute_type":"fp16")")).compute_type, ComputeType::Fp16);
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("compute_type":"bf16")")).compute_type, ComputeType::Bf16);
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("compute_type":"fp8")")).compute_type, ComputeType::Fp8);
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("compute_type":"auto")")).compute_type, ComputeType::Auto);
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("compute_type":"native")")).compute_type, ComputeType::Native);
  for (const char* bad : {"\"int8\"", "\"FP32\"", "32", "[]"})
    expect_rejected(kCompletions, completions(std::string(R"("compute_type":)") + bad), "compute_type", "\"fp32\"");

  expect_rejected(kGenerate, generate(R"("return_token_ids":"no")"), "return_token_ids", "true or false");
}

TEST(ApiRequestUnsupported, AskingIsA400AndTheOffValuesPass) {
  // What says "nothing" passes.
  parse_ok(kCompletions, completions(R"("logit_bias":{},"suffix":"","best_of":1,"tools":[],"tool_choice":"none",)"
                                     R"("functions":[],"function_call":"auto","response_format":{"type":"text"})"));
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("n":3,"best_of":3)")).n, 3);
  parse_ok(kChat, chat(R"("tool_choice":"auto","response_format":{"type":"text"},"parallel_tool_calls":true)"));

  expect_rejected(kCompletions, completions(R"("logit_bias":{"50256":-100})"), "logit_bias", "not supported");
  expect_rejected(kChat, chat(R"("logit_bias":[1])"), "logit_bias", "must be an object");
  expect_rejected(kCompletions, completions(R"("suffix":"}")"), "suffix", "not supported");
  expect_rejected(kGenerate, generate(R"("suffix":3)"), "suffix", "must be a string");
  expect_rejected(kCompletions, completions(R"("best_of":2)"), "best_of", "not supported");
  expect_rejected(kCompletions, completions(R"("n":2,"best_of":3)"), "best_of", "equal to n (2)");
  expect_rejected(kCompletions, completions(R"("best_of":0)"), "best_of", "integer");
  const std::string tool = R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}})";
  expect_rejected(kCompletions, completions(R"("tools":[)" + tool + "]"), "tools", "only for /v1/chat/completions");
  expect_rejected(kChat, chat(R"("tools":{})"), "tools", "must be an array");
  expect_rejected(kChat, chat(R"("functions":[{"name":"f"}])"), "functions", "not supported");
  expect_rejected(kChat, chat(R"("tool_choice":"required")"), "tool_choice", "no tools are given");
  expect_rejected(kChat, chat(R"("tool_choice":{"type":"function","function":{"name":"f"}})"), "tool_choice.function.name",
                  "not one of the tools");
  expect_rejected(kChat, chat(R"("function_call":{"name":"f"})"), "function_call");
  expect_rejected(kChat, chat(R"("response_format":{})"), "response_format.type");
  expect_rejected(kChat, chat(R"("response_format":"json")"), "response_format", "must be an object");
}

TEST(ApiRequest, StructuredOutputFieldsCompileToAGrammar) {
  const std::pair<ApiEndpoint, std::string> asks[] = {
      {kChat, chat(R"("response_format":{"type":"json_object"})")},
      {kChat, chat(R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"},"strict":true}})")},
      {kCompletions, completions(R"("json_schema":{"type":"array"})")},
      {kCompletions, completions(R"("grammar":"root ::= [a-z]+")")},
      {kChat, chat(R"("guided_json":{"type":"object"})")},
      {kChat, chat(R"("guided_json":"{\"type\":\"string\"}")")},
      {kCompletions, completions(R"("guided_regex":"\\d{3}")")},
      {kCompletions, completions(R"("guided_choice":["a","b"])")},
      {kCompletions, completions(R"("guided_grammar":"root ::= \"x\"")")},
      {kCompletions, completions(R"("structured_outputs":{"choice":["a"]})")},
  };
  for (const auto& [ep, body] : asks) {
    ApiParseResult r = parse_api_request(ep, body);
    const auto* req = std::get_if<ApiRequest>(&r);
    ASSERT_NE(req, nullptr) << body << ": " << std::get<http::ApiError>(r).message;
    EXPECT_NE(req->grammar, nullptr) << body;
    EXPECT_FALSE(req->grammar_param.empty()) << body;
  }
  ApiParseResult text = parse_api_request(kChat, chat(R"("response_format":{"type":"text"})"));
  ASSERT_TRUE(std::holds_alternative<ApiRequest>(text));
  EXPECT_EQ(std::get<ApiRequest>(text).grammar, nullptr);
}

TEST(ApiRequest, BadStructuredOutputIsRefusedByName) {
  expect_rejected(kChat, chat(R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"integer","minimum":1}}})"),
                  "response_format.json_schema.schema", "unsupported keyword 'minimum'");
  expect_rejected(kChat, chat(R"("response_format":{"type":"json_schema","json_schema":{"name":"x"}})"),
                  "response_format.json_schema.schema", "must be a JSON schema object");
  expect_rejected(kChat, chat(R"("response_format":{"type":"json_schema","json_schema":{"schema":{},"bogus":1}})"),
                  "response_format.json_schema.bogus");
  expect_rejected(kChat, chat(R"("response_format":{"type":"yaml"})"), "response_format.type");
  expect_rejected(kCompletions, completions(R"("grammar":"root ::= item")"), "grammar", "rule 'item' is used but not defined");
  expect_rejected(kCompletions, completions(R"("grammar":7)"), "grammar", "must be a string");
  expect_rejected(kCompletions, completions(R"("guided_regex":"(a")"), "guided_regex", "'(' without ')'");
  expect_rejected(kCompletions, completions(R"("guided_choice":[])"), "guided_choice", "non-empty array of strings");
  expect_rejected(kCompletions, completions(R"("guided_json":"{nope")"), "guided_json", "not JSON text");
  expect_rejected(kCompletions, completions(R"("structured_outputs":{"xml":"a"})"), "structured_outputs.xml");
  expect_rejected(kCompletions, completions(R"("guided_regex":"a","grammar":"root ::= \"a\"")"), "guided_regex",
                  "both ask for structured output");
}

// ---- a real client ----

TEST(ApiRequestClients, OpenAiNodeClientChatBody) {
  // What openai@4 (npm) sends for client.chat.completions.create({...}) with
  // stream and usage: its JSON.stringify of the params, key order as written.
  const std::string body =
      R"({"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful assistant."},)"
      R"({"role":"user","content":[{"type":"text","text":"Write a haiku "},{"type":"text","text":"about the sea."}]}],)"
      R"("max_completion_tokens":128,"temperature":0.7,"top_p":0.95,"frequency_penalty":0,"presence_penalty":0,)"
      R"("n":1,"seed":1234,"stop":["\n\n"],"stream":true,"stream_options":{"include_usage":true},)"
      R"("logprobs":true,"top_logprobs":2,"user":"user-1234","parallel_tool_calls":null,"store":false,)"
      R"("metadata":null,"service_tier":"auto"})";
  const ApiRequest r = parse_ok(kChat, body);
  EXPECT_EQ(r.model, "gpt-4o-mini");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1]["content"], "Write a haiku about the sea.");
  EXPECT_EQ(r.max_tokens, 128);
  EXPECT_EQ(r.sampling.temperature, 0.7f);
  EXPECT_EQ(r.sampling.top_p, 0.95f);
  EXPECT_EQ(r.sampling.seed, 1234u);
  EXPECT_TRUE(r.seed_given);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n\n"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.logprobs, 2);
  EXPECT_EQ(r.user, "user-1234");

  // client.completions.create({...}) with a batch of prompts.
  const ApiRequest c = parse_ok(
      kCompletions, R"({"model":"m","prompt":["Say this is a test","And this"],"max_tokens":7,"temperature":0,)"
                    R"("logprobs":3,"echo":true,"stop":"\n","suffix":null,"best_of":null,"logit_bias":null})");
  EXPECT_EQ(c.prompts.size(), 2u);
  EXPECT_EQ(c.logprobs, 3);
  EXPECT_TRUE(c.echo);
}

}  // namespace
}  // namespace th::server

namespace th::server {
namespace {

TEST(ApiRequestCacheSalt, ReadOnEveryEndpointCheckedForTypeLengthAndEmptiness) {
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("cache_salt":"s1")")).cache_salt, "s1");
  EXPECT_EQ(parse_ok(kChat, chat(R"("cache_salt":"s2")")).cache_salt, "s2");
  EXPECT_EQ(parse_ok(kGenerate, generate(R"("cache_salt":"s3")")).cache_salt, "s3");
  EXPECT_EQ(parse_ok(kCompletions, completions(R"("cache_salt":null)")).cache_salt, "");
  expect_rejected(kCompletions, completions(R"("cache_salt":7)"), "cache_salt", "string");
  expect_rejected(kCompletions, completions(R"("cache_salt":"")"), "cache_salt", "empty");
  expect_rejected(kChat, chat(R"("cache_salt":")" + std::string(257, 'x') + R"(")"), "cache_salt", "256");
}

}  // namespace
}  // namespace th::server
