// Tools in a chat request (tool_request.h) and calls in the response (tool_call_response.h):
// validation by name, the template's view of past calls, the schema hook, and the wire shape
// of calls whole and streamed (the stream's deltas add up to the whole response).
#include "server/tool_request.h"

#include <gtest/gtest.h>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "server/openai_format.h"
#include "server/tool_call_response.h"

namespace th::server {
namespace {

using Json = nlohmann::ordered_json;

const char* kTools =
    R"([{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object",)"
    R"("properties":{"city":{"type":"string"}},"required":["city"]}}},{"type":"function","function":{"name":"get_time"}}])";

std::string tool_chat(const std::string& more) {
  return R"({"messages":[{"role":"user","content":"hi"}],"tools":)" + std::string(kTools) + (more.empty() ? "" : "," + more) + "}";
}

ApiRequest tool_ok(const std::string& body) {
  ApiParseResult r = parse_api_request(ApiEndpoint::ChatCompletions, body);
  if (auto* e = std::get_if<http::ApiError>(&r)) ADD_FAILURE() << body << ": " << e->message;
  return std::holds_alternative<ApiRequest>(r) ? std::get<ApiRequest>(std::move(r)) : ApiRequest{};
}

void tool_refused(const std::string& body, const std::string& param, const std::string& words = "") {
  ApiParseResult r = parse_api_request(ApiEndpoint::ChatCompletions, body);
  ASSERT_TRUE(std::holds_alternative<http::ApiError>(r)) << body;
  const http::ApiError& e = std::get<http::ApiError>(r);
  EXPECT_EQ(e.param.value_or(""), param) << e.message;
  EXPECT_NE(e.message.find(words), std::string::npos) << e.message;
}

TEST(ToolRequest, ChoicesAreRead) {
  ApiRequest r = tool_ok(tool_chat(""));
  EXPECT_EQ(r.tools.tools.size(), 2u);
  EXPECT_EQ(r.tools.choice, ToolChoice::Auto);
  EXPECT_TRUE(r.tools.active());
  EXPECT_EQ(r.tools.callable(), (std::vector<std::string>{"get_weather", "get_time"}));
  EXPECT_FALSE(tool_ok(tool_chat(R"("tool_choice":"none")")).tools.active());
  EXPECT_EQ(tool_ok(tool_chat(R"("tool_choice":"required")")).tools.choice, ToolChoice::Required);
  ApiRequest named = tool_ok(tool_chat(R"("tool_choice":{"type":"function","function":{"name":"get_time"}})"));
  EXPECT_EQ(named.tools.choice, ToolChoice::Named);
  EXPECT_EQ(named.tools.callable(), std::vector<std::string>{"get_time"});
  EXPECT_FALSE(tool_ok(tool_chat(R"("parallel_tool_calls":false)")).tools.parallel);
}

TEST(ToolRequest, BadToolsAreRefusedByName) {
  tool_refused(tool_chat(R"("tool_choice":{"type":"function","function":{"name":"nope"}})"), "tool_choice.function.name", "not one of the tools");
  tool_refused(tool_chat(R"("tool_choice":"always")"), "tool_choice", "\"required\"");
  tool_refused(tool_chat(R"("tool_choice":{"type":"function"})"), "tool_choice", "name a function");
  const std::string base = R"({"messages":[{"role":"user","content":"hi"}],"tools":)";
  tool_refused(base + R"([{"type":"retrieval"}]})", "tools[0].type", "\"function\"");
  tool_refused(base + R"([{"type":"function","function":{"name":"a b"}}]})", "tools[0].function.name", "a-z");
  tool_refused(base + R"([{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]})",
          "tools[1].function.name", "twice");
  tool_refused(base + R"([{"type":"function","function":{"name":"f","parameters":[]}}]})", "tools[0].function.parameters");
  tool_refused(base + R"([{"type":"function","function":{"name":"f","strict":"yes"}}]})", "tools[0].function.strict");
  tool_refused(base + R"([{"type":"function","function":{"name":"f","extra":1}}]})", "tools[0].function.extra");
  tool_refused(base + R"([{"type":"function"}]})", "tools[0].function");
  tool_refused(base + R"("x"})", "tools", "must be an array");
  std::string many = "[";
  for (int i = 0; i <= 128; ++i) many += std::string(i ? "," : "") + R"({"type":"function","function":{"name":"f)" + std::to_string(i) + R"("}})";
  tool_refused(base + many + "]}", "tools", "at most 128");
}

TEST(ToolRequest, PastCallsAreReadyForTemplates) {
  // The openai client sends arguments as a JSON string; templates print them with tojson.
  const std::string body = R"({"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[)"
                           R"({"id":"call_1","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"UTC\"}"}}]},)"
                           R"({"role":"tool","tool_call_id":"call_1","content":"12:00"}],"tools":)" + std::string(kTools) + "}";
  ApiRequest r = tool_ok(body);
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"], Json::parse(R"({"tz":"UTC"})"));
  tool_refused(R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"not json"}}]}]})",
          "messages[0].tool_calls[0].function.arguments", "JSON object");
  tool_refused(R"({"messages":[{"role":"user","content":"x","tool_calls":[]}]})", "messages[0].tool_calls", "assistant");
  tool_refused(R"({"messages":[{"role":"assistant","tool_calls":[{"function":{}}]}]})", "messages[0].tool_calls[0].function.name");
  tool_refused(R"({"messages":[{"role":"tool","tool_call_id":5,"content":"x"}]})", "messages[0].tool_call_id");
}

TEST(ToolRequest, CallSchemaForTheGrammarEngine) {
  EXPECT_FALSE(tool_call_schema(tool_ok(tool_chat("")).tools).has_value());  // auto: nothing to enforce
  EXPECT_FALSE(tool_call_schema(tool_ok(tool_chat(R"("tool_choice":"none")")).tools).has_value());
  const Json named = *tool_call_schema(tool_ok(tool_chat(R"("tool_choice":{"type":"function","function":{"name":"get_weather"}})")).tools);
  EXPECT_EQ(named["properties"]["name"]["const"], "get_weather");
  EXPECT_EQ(named["properties"]["arguments"]["required"], Json::array({"city"}));
  EXPECT_EQ(named["required"], Json::array({"name", "arguments"}));
  const Json required = *tool_call_schema(tool_ok(tool_chat(R"("tool_choice":"required")")).tools, "parameters");
  EXPECT_EQ(required["anyOf"].size(), 2u);
  EXPECT_EQ(required["anyOf"][1]["properties"]["parameters"], Json({{"type", "object"}}));
}

// The grammar of a demanded call, per format: exactly the calls the parser releases.
bool grammar_takes(const std::string& body, ToolCallFormat f, std::string_view text) {
  auto gbnf = tool_call_gbnf(tool_ok(body).tools, f);
  if (auto* e = std::get_if<http::ApiError>(&gbnf)) {
    ADD_FAILURE() << e->message;
    return false;
  }
  Result<grammar::Grammar> g = grammar::parse_gbnf(std::get<std::optional<std::string>>(gbnf).value_or(""));
  EXPECT_TRUE(g.ok()) << g.message();
  if (!g.ok()) return false;
  grammar::Matcher m(std::make_shared<const grammar::Grammar>(std::move(g).value()));
  return m.accept(text) && m.complete();
}

TEST(ToolRequest, DemandedCallsAreAGrammarInEachFormat) {
  const std::string named = tool_chat(R"("tool_choice":{"type":"function","function":{"name":"get_weather"}})");
  const std::string required = tool_chat(R"("tool_choice":"required")");
  const std::string weather = R"({"name": "get_weather", "arguments": {"city": "Oslo"}})";
  const std::string time = R"({"name": "get_time", "arguments": {}})";
  EXPECT_TRUE(grammar_takes(named, ToolCallFormat::Hermes, "<tool_call>\n" + weather + "\n</tool_call>"));
  EXPECT_FALSE(grammar_takes(named, ToolCallFormat::Hermes, "<tool_call>\n" + time + "\n</tool_call>"));
  EXPECT_FALSE(grammar_takes(named, ToolCallFormat::Hermes, "Sure. <tool_call>\n" + weather + "\n</tool_call>"));
  EXPECT_FALSE(grammar_takes(named, ToolCallFormat::Hermes, R"(<tool_call>
{"name": "get_weather", "arguments": {}}
</tool_call>)"));  // city is required
  const std::string two = "<tool_call>\n" + weather + "\n</tool_call>\n<tool_call>\n" + time + "\n</tool_call>";
  EXPECT_TRUE(grammar_takes(required, ToolCallFormat::Hermes, two));
  EXPECT_FALSE(grammar_takes(tool_chat(R"("tool_choice":"required","parallel_tool_calls":false)"), ToolCallFormat::Hermes, two));
  EXPECT_TRUE(grammar_takes(required, ToolCallFormat::Mistral, "[TOOL_CALLS][" + weather + ", " + time + "]"));
  EXPECT_TRUE(grammar_takes(named, ToolCallFormat::Mistral, "[TOOL_CALLS][" + weather + "]"));
  EXPECT_TRUE(grammar_takes(named, ToolCallFormat::Llama3, R"({"name": "get_weather", "parameters": {"city": "Oslo"}})"));
  EXPECT_FALSE(grammar_takes(named, ToolCallFormat::Llama3, weather));  // Llama 3 says "parameters"
  EXPECT_FALSE(std::get<std::optional<std::string>>(tool_call_gbnf(tool_ok(tool_chat("")).tools, ToolCallFormat::Hermes)).has_value());
}

TEST(ToolRequest, ParametersTheGrammarCannotEnforceAreNamed) {
  const std::string body = R"({"messages":[{"role":"user","content":"hi"}],"tool_choice":"required","tools":[)"
                           R"({"type":"function","function":{"name":"a"}},)"
                           R"({"type":"function","function":{"name":"b","parameters":{"type":"object","properties":)"
                           R"({"n":{"type":"integer","multipleOf":3}}}}}]})";
  auto gbnf = tool_call_gbnf(tool_ok(body).tools, ToolCallFormat::Hermes);
  ASSERT_TRUE(std::holds_alternative<http::ApiError>(gbnf));
  const http::ApiError& e = std::get<http::ApiError>(gbnf);
  EXPECT_EQ(e.param.value_or(""), "tools[1].function.parameters");
  EXPECT_NE(e.message.find("multipleOf"), std::string::npos) << e.message;
}

// A chat call whose model wrote `text`, answered whole and streamed.
Call tool_call_of(const std::string& body, ToolCallFormat f, const std::string& text, const std::string& finish) {
  Call c;
  c.req = tool_ok(body);
  c.req.stream = true;
  c.response_id = "chatcmpl-r1";
  c.tool_format = f;
  Choice ch;
  ch.text = text;
  ch.text_done = true;
  ch.finish_reason = finish;
  c.choices.push_back(std::move(ch));
  return c;
}

TEST(ToolCallResponse, WholeAndStreamedAgree) {
  const std::string text = "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
                           "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  Call c = tool_call_of(tool_chat(""), ToolCallFormat::Hermes, text, "stop");
  const PieceOf piece = [](int32_t) { return std::string(); };
  const WireJson whole = response_body(c, "m", piece);
  const WireJson& msg = whole["choices"][0]["message"];
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(msg["content"], "Checking.\n");
  ASSERT_EQ(msg["tool_calls"].size(), 2u);
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], R"({"city":"Oslo"})");
  const std::string id0 = msg["tool_calls"][0]["id"];
  EXPECT_EQ(id0.size(), 29u);
  EXPECT_EQ(id0.substr(0, 5), "call_");
  EXPECT_NE(id0, msg["tool_calls"][1]["id"]);

  // The stream: content, then per call a head (index, id, type, name, "") and its arguments.
  Choice& ch = c.choices[0];
  ch.tool_parser = make_tool_call_parser(ToolCallFormat::Hermes, c.req.tools.callable());
  std::vector<WireJson> chunks;
  while (std::optional<std::string> e = next_event(c, ch, "m", piece)) chunks.push_back(Json::parse(*e));
  ASSERT_EQ(chunks.size(), 6u);
  EXPECT_EQ(chunks[0]["choices"][0]["delta"], Json({{"content", "Checking.\n"}}));
  const WireJson& head = chunks[1]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(head["index"], 0);
  EXPECT_EQ(head["id"], id0);
  EXPECT_EQ(head["type"], "function");
  EXPECT_EQ(head["function"]["name"], "get_weather");
  EXPECT_EQ(head["function"]["arguments"], "");
  EXPECT_EQ(chunks[2]["choices"][0]["delta"]["tool_calls"][0], Json::parse(R"({"index":0,"function":{"arguments":"{\"city\":\"Oslo\"}"}})"));
  EXPECT_EQ(chunks[3]["choices"][0]["delta"]["tool_calls"][0]["index"], 1);
  for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(chunks[i]["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(chunks[5]["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(chunks[5]["choices"][0]["delta"], Json::object());
}

TEST(ToolCallResponse, NoCallIsPlainContentAndParallelFalseKeepsOne) {
  const PieceOf piece = [](int32_t) { return std::string(); };
  Call plain = tool_call_of(tool_chat(R"("tool_choice":"required")"), ToolCallFormat::Hermes, "Just text.", "stop");
  WireJson w = response_body(plain, "m", piece);
  EXPECT_EQ(w["choices"][0]["message"], Json({{"role", "assistant"}, {"content", "Just text."}}));
  EXPECT_EQ(w["choices"][0]["finish_reason"], "stop");
  Call one = tool_call_of(tool_chat(R"("parallel_tool_calls":false)"), ToolCallFormat::Mistral,
                          R"([TOOL_CALLS][{"name":"get_time","arguments":{}},{"name":"get_weather","arguments":{"city":"x"}}])", "stop");
  w = response_body(one, "m", piece);
  ASSERT_EQ(w["choices"][0]["message"]["tool_calls"].size(), 1u);
  EXPECT_TRUE(w["choices"][0]["message"]["content"].is_null());
  const std::string id = w["choices"][0]["message"]["tool_calls"][0]["id"];
  EXPECT_EQ(id.size(), 9u);  // Mistral's template refuses any other length
  // A call cut by max_tokens stays content, and the reason stays "length".
  Call cut = tool_call_of(tool_chat(""), ToolCallFormat::Hermes, "<tool_call>{\"name\": \"get_ti", "length");
  w = response_body(cut, "m", piece);
  EXPECT_EQ(w["choices"][0]["message"]["content"], "<tool_call>{\"name\": \"get_ti");
  EXPECT_EQ(w["choices"][0]["finish_reason"], "length");
}

}  // namespace
}  // namespace th::server
