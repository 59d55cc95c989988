// The tool-call parsers on recorded outputs: whole, and streamed split at every byte (the
// same content and calls either way), malformed calls as content, and the format read from
// real chat templates.
#include "server/tool_call_parser.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace th::server {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::vector<std::string> kFunctions = {"get_weather", "get_time"};

ToolParseStep whole(ToolCallFormat f, std::string_view text) {
  auto p = make_tool_call_parser(f, kFunctions);
  return parse_tool_calls(*p, text);
}

// Fed in two pieces split at `at`, and byte by byte.
void expect_same_when_split(ToolCallFormat f, const std::string& text, const ToolParseStep& want) {
  for (size_t at = 0; at <= text.size(); ++at) {
    auto p = make_tool_call_parser(f, kFunctions);
    ToolParseStep got = p->push(std::string_view(text).substr(0, at));
    ToolParseStep b = p->push(std::string_view(text).substr(at));
    ToolParseStep e = p->finish();
    got.content += b.content + e.content;
    for (auto* s : {&b, &e})
      for (ToolCall& c : s->calls) got.calls.push_back(c);
    ASSERT_EQ(got.content, want.content) << "split at " << at;
    ASSERT_EQ(got.calls, want.calls) << "split at " << at;
  }
  auto p = make_tool_call_parser(f, kFunctions);
  ToolParseStep got;
  for (char c : text) {
    ToolParseStep s = p->push(std::string_view(&c, 1));
    got.content += s.content;
    for (ToolCall& x : s.calls) got.calls.push_back(x);
  }
  ToolParseStep e = p->finish();
  got.content += e.content;
  for (ToolCall& x : e.calls) got.calls.push_back(x);
  EXPECT_EQ(got.content, want.content);
  EXPECT_EQ(got.calls, want.calls);
}

void check(ToolCallFormat f, const std::string& text, const std::string& content, const std::vector<ToolCall>& calls) {
  SCOPED_TRACE(text);
  const ToolParseStep w = whole(f, text);
  EXPECT_EQ(w.content, content);
  EXPECT_EQ(w.calls, calls);
  expect_same_when_split(f, text, w);
}

TEST(HermesToolParser, CompleteCalls) {
  check(ToolCallFormat::Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>", "",
        {{"get_weather", R"({"city":"Oslo"})"}});
  check(ToolCallFormat::Hermes,
        "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"n\": [1, {\"x\": \"}\"}]}}\n"
        "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
        "Let me check.\n", {{"get_weather", R"({"city":"Oslo","n":[1,{"x":"}"}]})"}, {"get_time", "{}"}});
  // No closing tag at the end of the output; arguments given as a string; none at all.
  check(ToolCallFormat::Hermes, "<tool_call>{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"UTC\\\"}\"}", "",
        {{"get_time", R"({"tz": "UTC"})"}});
  check(ToolCallFormat::Hermes, "<tool_call>{\"name\": \"get_time\"}</tool_call>", "", {{"get_time", "{}"}});
  // Unicode and escapes survive.
  check(ToolCallFormat::Hermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich \\\"Z\\\" 東京\"}}</tool_call>",
        "", {{"get_weather", "{\"city\":\"Zürich \\\"Z\\\" 東京\"}"}});
}

TEST(HermesToolParser, MalformedIsContent) {
  // Unknown function, broken JSON, no JSON, unfinished: the text stays content, marker included.
  check(ToolCallFormat::Hermes, "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>", {});
  check(ToolCallFormat::Hermes, "<tool_call>{\"name\": \"get_time\", \"arguments\": {]}}</tool_call>",
        "<tool_call>{\"name\": \"get_time\", \"arguments\": {]}}</tool_call>", {});
  check(ToolCallFormat::Hermes, "a <tool_call> b", "a <tool_call> b", {});
  check(ToolCallFormat::Hermes, "<tool_call>{\"name\": \"get_time\", \"argu", "<tool_call>{\"name\": \"get_time\", \"argu", {});
  check(ToolCallFormat::Hermes, "<tool_call>{\"name\": 5}", "<tool_call>{\"name\": 5}", {});
  check(ToolCallFormat::Hermes, "<tool_call>{\"name\": \"get_time\", \"arguments\": \"now\"}",
        "<tool_call>{\"name\": \"get_time\", \"arguments\": \"now\"}", {});
  check(ToolCallFormat::Hermes, "<tool_call>{\"name\": \"get_time\", \"arguments\": 7}", "<tool_call>{\"name\": \"get_time\", \"arguments\": 7}", {});
  // A malformed block, then a good one: only the good one is a call.
  check(ToolCallFormat::Hermes, "<tool_call>oops <tool_call>{\"name\": \"get_time\"}</tool_call> done",
        "<tool_call>oops done", {{"get_time", "{}"}});
  // Text that only looks like the start of the marker.
  check(ToolCallFormat::Hermes, "x < y and <tool", "x < y and <tool", {});
  std::string deep = "<tool_call>{\"name\": \"get_time\", \"arguments\": " + std::string(100, '[') + std::string(100, ']') + "}";
  check(ToolCallFormat::Hermes, deep, deep, {});
}

TEST(HermesToolParser, PlainTextPassesThrough) {
  check(ToolCallFormat::Hermes, "Hello! No tools needed.", "Hello! No tools needed.", {});
  check(ToolCallFormat::Hermes, "", "", {});
}

TEST(Llama3ToolParser, BareJsonAndPythonTag) {
  check(ToolCallFormat::Llama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", "",
        {{"get_weather", R"({"city":"Oslo"})"}});
  check(ToolCallFormat::Llama3, "  \n{\"name\": \"get_time\", \"parameters\": {}}; {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}",
        "", {{"get_time", "{}"}, {"get_weather", R"({"city":"Rome"})"}});
  check(ToolCallFormat::Llama3, "<|python_tag|>{\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}", "",
        {{"get_time", R"({"tz":"UTC"})"}});
  check(ToolCallFormat::Llama3, "Sure. <|python_tag|>{\"name\": \"get_time\", \"arguments\": {}}", "Sure. ", {{"get_time", "{}"}});
}

TEST(Llama3ToolParser, MalformedIsContent) {
  // JSON that is not a call, an unknown function, a built-in tool written as Python, JSON later in the text.
  check(ToolCallFormat::Llama3, "{\"answer\": 42}", "{\"answer\": 42}", {});
  check(ToolCallFormat::Llama3, "{\"name\": \"nope\", \"parameters\": {}}", "{\"name\": \"nope\", \"parameters\": {}}", {});
  check(ToolCallFormat::Llama3, "<|python_tag|>brave_search.call(query=\"x\")", "<|python_tag|>brave_search.call(query=\"x\")", {});
  check(ToolCallFormat::Llama3, "The call is {\"name\": \"get_time\", \"parameters\": {}}",
        "The call is {\"name\": \"get_time\", \"parameters\": {}}", {});
  check(ToolCallFormat::Llama3, "{\"name\": \"get_time\", \"parameters\": {", "{\"name\": \"get_time\", \"parameters\": {", {});
  // A good call then a bad one: the call, and the rest as content.
  check(ToolCallFormat::Llama3, "{\"name\": \"get_time\", \"parameters\": {}}; {\"bad\": 1}", "; {\"bad\": 1}", {{"get_time", "{}"}});
}

TEST(MistralToolParser, CallsAndMalformed) {
  check(ToolCallFormat::Mistral,
        "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}, \"id\": \"abcdefghi\"}, "
        "{\"name\": \"get_time\", \"arguments\": {}}]",
        "", {{"get_weather", R"({"city":"Oslo"})"}, {"get_time", "{}"}});
  check(ToolCallFormat::Mistral, "I will call.[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}]", "I will call.", {{"get_time", "{}"}});
  check(ToolCallFormat::Mistral, "[TOOL_CALLS]{\"name\": \"get_time\"}", "[TOOL_CALLS]{\"name\": \"get_time\"}", {});
  check(ToolCallFormat::Mistral, "[TOOL_CALLS][]", "[TOOL_CALLS][]", {});
  check(ToolCallFormat::Mistral, "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"x\"}]",
        "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"x\"}]", {});
  check(ToolCallFormat::Mistral, "[TOOL_CALLS]get_time[ARGS]{}", "[TOOL_CALLS]get_time[ARGS]{}", {});
  check(ToolCallFormat::Mistral, "[TOOL_CALLS][{\"name\": \"get_time\"", "[TOOL_CALLS][{\"name\": \"get_time\"", {});
}

// Random outputs made of the formats' pieces (markers, halves of them, JSON fragments,
// text): whatever the text, streaming it in random pieces gives what parsing it whole does,
// and every call has a known name and JSON arguments.
TEST(ToolCallParsers, RandomOutputsStreamAsTheyParseWhole) {
  static const char* const kPieces[] = {
      "<tool_call>", "</tool_call>", "<tool", "_call>", "[TOOL_CALLS]", "<|python_tag|>", "{", "}", "[", "]", ",", ";",
      "\"name\"", ": ", "\"get_time\"", "\"get_weather\"", "\"nope\"", "\"arguments\"", "\"parameters\"", "{}",
      "{\"city\": \"Oslo\"}", "\"now\"", "\"{}\"", "\"", "\\", " ", "\n", "text", "é", "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]", "{\"name\": \"get_time\", \"arguments\": {}}"};
  std::mt19937 rng(19);
  for (ToolCallFormat f : {ToolCallFormat::Hermes, ToolCallFormat::Llama3, ToolCallFormat::Mistral}) {
    size_t calls = 0;
    for (int n = 0; n < 1500; ++n) {
      std::string text;
      for (int k = 0, len = static_cast<int>(rng() % 24); k < len; ++k) text += kPieces[rng() % std::size(kPieces)];
      const ToolParseStep want = whole(f, text);
      calls += want.calls.size();
      for (const ToolCall& c : want.calls) {
        EXPECT_TRUE(c.name == "get_time" || c.name == "get_weather") << text;
        EXPECT_FALSE(nlohmann::json::parse(c.arguments, nullptr, false).is_discarded()) << text;
      }
      auto p = make_tool_call_parser(f, kFunctions);
      ToolParseStep got;
      for (size_t at = 0; at < text.size();) {
        const size_t n_bytes = std::min<size_t>(text.size() - at, 1 + rng() % 7);
        ToolParseStep s = p->push(std::string_view(text).substr(at, n_bytes));
        got.content += s.content;
        for (ToolCall& c : s.calls) got.calls.push_back(c);
        at += n_bytes;
      }
      ToolParseStep e = p->finish();
      got.content += e.content;
      for (ToolCall& c : e.calls) got.calls.push_back(c);
      ASSERT_EQ(got.content, want.content) << text;
      ASSERT_EQ(got.calls, want.calls) << text;
    }
    EXPECT_GT(calls, 10u) << tool_call_format_name(f) << ": the random outputs hold too few calls to test anything";
  }
}

TEST(ToolCallFormat, DetectedFromRealTemplates) {
  auto format_of = [](const char* file) {
    return detect_tool_call_format(read_text(test::source_path(std::string("tests/data/chat_templates/") + file)));
  };
  EXPECT_EQ(format_of("qwen2.5-instruct.jinja"), ToolCallFormat::Hermes);
  EXPECT_EQ(format_of("qwen3.jinja"), ToolCallFormat::Hermes);
  EXPECT_EQ(format_of("llama3.1-instruct.jinja"), ToolCallFormat::Llama3);
  EXPECT_EQ(format_of("mistral-instruct-v0.3.jinja"), ToolCallFormat::Mistral);
  EXPECT_EQ(detect_tool_call_format("{{ messages }}"), ToolCallFormat::Hermes);
}

}  // namespace
}  // namespace th::server
