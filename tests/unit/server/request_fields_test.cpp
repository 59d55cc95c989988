// No request field is silently ignored: every field OpenAI, vLLM and llama-server document
// for completions and chat is either honoured here (in kHonoured) or refused with a 400
// that names it. A field added to the parser's reading without a test, or one that slips
// back to being ignored, fails here.
#include "server/request_fields.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace th::server {
namespace {

using Json = nlohmann::ordered_json;

// Fields honoured, with a value that turns each on (validity checked by the parser).
const std::vector<std::pair<std::string, Json>> kHonoured = {
    {"model", "m"}, {"max_tokens", 5}, {"temperature", 0.5}, {"top_p", 0.9}, {"n", 2}, {"stream", true},
    {"stop", Json::array({"x"})}, {"presence_penalty", 0.5}, {"frequency_penalty", 0.5}, {"seed", 7}, {"user", "u"},
    {"top_k", 5}, {"min_p", 0.1}, {"repetition_penalty", 1.1}, {"stop_token_ids", Json::array({2})},
    {"ignore_eos", true}, {"priority", 1}, {"cache_salt", "s"}, {"n_predict", 5}, {"include_stop_str_in_output", true},
    {"skip_special_tokens", true}, {"return_token_ids", true},
    {"parallel_tool_calls", false}, {"min_tokens", 3},
    // No-ops at these values: the one tier.
    {"service_tier", "auto"}, {"store", false},
    // Structured output.
    {"response_format", {{"type", "json_object"}}}, {"json_schema", {{"type", "object"}}}, {"grammar", "root ::= \"x\""},
    {"guided_json", {{"type", "object"}}}, {"guided_regex", "a+"}, {"guided_choice", Json::array({"a"})},
    {"guided_grammar", "root ::= \"x\""}, {"structured_outputs", {{"regex", "a"}}},
};
// Chat's own, and completions' own.
const std::vector<std::pair<std::string, Json>> kHonouredChat = {
    {"max_completion_tokens", 5}, {"logprobs", true}, {"add_generation_prompt", false},
    {"tools", Json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}})}, {"tool_choice", "auto"},
    {"chat_template_kwargs", {{"enable_thinking", false}}}};
const std::vector<std::pair<std::string, Json>> kHonouredCompletions = {{"logprobs", 2}, {"echo", true}};

// The documented request fields of the three projects (OpenAI's API reference for
// /v1/completions and /v1/chat/completions, vLLM's "Extra parameters" of its
// OpenAI-compatible server, llama-server's README for /completion and
// /v1/chat/completions), each with an "on" value.
const std::vector<std::pair<std::string, Json>> kDocumented = {
    // OpenAI
    {"best_of", 3}, {"echo", true}, {"logit_bias", {{"50256", -100}}}, {"logprobs", 2}, {"suffix", "x"},
    {"stream_options", {{"include_usage", true}}}, {"audio", {{"voice", "alloy"}}}, {"function_call", "auto_x"},
    {"functions", Json::array({{{"name", "f"}}})}, {"max_completion_tokens", 5}, {"metadata", {{"a", "b"}}},
    {"modalities", Json::array({"text"})}, {"parallel_tool_calls", true}, {"prediction", {{"type", "content"}}},
    {"reasoning_effort", "low"}, {"response_format", {{"type", "json_object"}}}, {"service_tier", "flex"},
    {"store", true}, {"tool_choice", "required"}, {"tools", Json::array({{{"type", "function"}}})},
    {"top_logprobs", 2}, {"web_search_options", Json::object({{"x", 1}})}, {"prompt_cache_key", "k"},
    {"safety_identifier", "s"}, {"verbosity", "low"},
    // vLLM
    {"use_beam_search", true}, {"length_penalty", 2.0}, {"min_tokens", 3}, {"include_stop_str_in_output", true},
    {"skip_special_tokens", false}, {"spaces_between_special_tokens", false}, {"truncate_prompt_tokens", 5},
    {"prompt_logprobs", 1}, {"allowed_token_ids", Json::array({1, 2})}, {"bad_words", Json::array({"x"})},
    {"echo", true}, {"add_special_tokens", true}, {"continue_final_message", true}, {"documents", Json::array()},
    {"chat_template", "{{x}}"}, {"chat_template_kwargs", {{"enable_thinking", false}}},
    {"mm_processor_kwargs", {{"a", 1}}}, {"guided_json", {{"type", "object"}}}, {"guided_regex", "a+"},
    {"guided_choice", Json::array({"a"})}, {"guided_grammar", "root ::= x"}, {"guided_decoding_backend", "xgrammar"},
    {"guided_whitespace_pattern", " "}, {"structured_outputs", {{"json", true}}}, {"request_id", "r"},
    {"return_tokens_as_token_ids", true}, {"logits_processors", Json::array({"x"})}, {"kv_transfer_params", {{"a", 1}}},
    {"vllm_xargs", {{"a", 1}}}, {"add_generation_prompt", false}, {"return_token_ids", true},
    // llama-server
    {"n_predict", 5}, {"n_keep", 5}, {"n_indent", 2}, {"typical_p", 0.5}, {"repeat_last_n", 32},
    {"repeat_penalty", 1.2}, {"dry_multiplier", 0.8}, {"dry_base", 1.75}, {"dry_allowed_length", 2},
    {"dry_penalty_last_n", -1}, {"dry_sequence_breakers", Json::array({"\n"})}, {"xtc_probability", 0.5},
    {"xtc_threshold", 0.1}, {"mirostat", 2}, {"mirostat_tau", 5.0}, {"mirostat_eta", 0.1}, {"grammar", "root ::= x"},
    {"json_schema", {{"type", "object"}}}, {"id_slot", 1}, {"cache_prompt", false}, {"return_tokens", true},
    {"samplers", Json::array({"top_k"})}, {"timings_per_token", true}, {"post_sampling_probs", true},
    {"response_fields", Json::array({"content"})}, {"lora", Json::array()}, {"n_probs", 2}, {"min_keep", 1},
    {"t_max_predict_ms", 100}, {"image_data", Json::array({{{"data", "x"}}})}, {"dynatemp_range", 0.5},
    {"dynatemp_exponent", 1.0}, {"top_n_sigma", 1.0}, {"slot_id", 0}, {"ignore_eos", true},
    {"parse_tool_calls", true}, {"reasoning_format", "none"}, {"thinking_forced_open", true},
};

bool in(const std::vector<std::pair<std::string, Json>>& list, const std::string& name, Json* value = nullptr) {
  for (const auto& [n, v] : list)
    if (n == name) {
      if (value) *value = v;
      return true;
    }
  return false;
}

void walk(ApiEndpoint endpoint, Json base, const std::vector<std::pair<std::string, Json>>& own) {
  for (const auto& [name, value] : kDocumented) {
    Json body = base;
    body[name] = value;
    Json honoured_value;
    const bool honoured = in(kHonoured, name, &honoured_value) || in(own, name, &honoured_value);
    // Honoured at some values only; the documented value here is one of the others.
    const bool other_value = name == "skip_special_tokens" || name == "service_tier" || name == "store";
    if (honoured && !other_value) body[name] = honoured_value;  // e.g. logprobs: chat's bool, completions' int
    ApiParseResult r = parse_api_request(endpoint, body.dump());
    SCOPED_TRACE(body.dump());
    if (honoured && !other_value) {
      if (const auto* e = std::get_if<http::ApiError>(&r)) ADD_FAILURE() << name << " is honoured but refused: " << e->message;
      continue;
    }
    const auto* e = std::get_if<http::ApiError>(&r);
    if (!e) {
      ADD_FAILURE() << name << " was accepted but is not in the honoured set (silently ignored?)";
      continue;
    }
    EXPECT_EQ(e->param.value_or("").substr(0, name.size()), name) << e->message;
  }
  for (const auto& list : {kHonoured, own}) {
    for (const auto& [name, value] : list) {
      Json body = base;
      body[name] = value;
      ApiParseResult r = parse_api_request(endpoint, body.dump());
      if (const auto* e = std::get_if<http::ApiError>(&r)) ADD_FAILURE() << name << ": " << e->message;
    }
  }
}

TEST(RequestFields, EveryDocumentedCompletionsFieldIsHonouredOrRefusedByName) {
  walk(ApiEndpoint::Completions, {{"prompt", "hi"}}, kHonouredCompletions);
}

TEST(RequestFields, EveryDocumentedChatFieldIsHonouredOrRefusedByName) {
  walk(ApiEndpoint::ChatCompletions, {{"messages", Json::array({{{"role", "user"}, {"content", "hi"}}})}}, kHonouredChat);
}

TEST(RequestFields, NPredictIsMaxTokens) {
  auto max_tokens = [](const std::string& body) {
    ApiParseResult r = parse_api_request(ApiEndpoint::Completions, body);
    return std::holds_alternative<ApiRequest>(r) ? std::get<ApiRequest>(r).max_tokens : -2;
  };
  EXPECT_EQ(max_tokens(R"({"prompt":"x","n_predict":7})"), 7);
  EXPECT_EQ(max_tokens(R"({"prompt":"x","n_predict":-1})"), -1);
  EXPECT_EQ(max_tokens(R"({"prompt":"x","n_predict":7,"max_tokens":7})"), 7);
  EXPECT_EQ(max_tokens(R"({"prompt":"x","n_predict":7,"max_tokens":8})"), -2);
  EXPECT_EQ(max_tokens(R"({"prompt":"x","n_predict":0})"), -2);
  EXPECT_EQ(max_tokens(R"({"prompt":"x","n_predict":"7"})"), -2);
}

// An unknown field's name is echoed one line long: control bytes become '?', long names are cut
// (the fuzz target found a DEL byte in a name going into the message as it was).
TEST(RequestFields, AnUnknownNameIsEchoedOnOneLine) {
  const std::string body = std::string(R"({"prompt":"x","ab\u007fc\nd":1,")") + std::string(200, 'z') + R"(":2})";
  ApiParseResult r = parse_api_request(ApiEndpoint::Completions, body);
  ASSERT_TRUE(std::holds_alternative<http::ApiError>(r));
  const http::ApiError& e = std::get<http::ApiError>(r);
  for (char c : e.message) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7F) << e.message;
  EXPECT_EQ(e.param, "ab?c?d");
  EXPECT_NE(e.message.find("zzz..."), std::string::npos) << e.message;
  EXPECT_LT(e.message.size(), 200u) << e.message;
}

// A field named "" is named by its quotes, never by an empty param (api_request_fuzz found it).
TEST(RequestFields, AnEmptyNameIsNamedByItsQuotes) {
  ApiParseResult r = parse_api_request(ApiEndpoint::Completions, R"({"prompt":"x","":1})");
  ASSERT_TRUE(std::holds_alternative<http::ApiError>(r));
  EXPECT_EQ(std::get<http::ApiError>(r).param, "\"\"") << std::get<http::ApiError>(r).message;
}

TEST(RequestFields, OffValuesOfTheRefusedPass) {
  for (const char* body : {R"({"prompt":"x","chat_template_kwargs":{}})",
                           R"({"prompt":"x","prompt_logprobs":null})", R"({"prompt":"x","include_stop_str_in_output":false})"}) {
    EXPECT_TRUE(std::holds_alternative<ApiRequest>(parse_api_request(ApiEndpoint::Completions, body))) << body;
  }
  ApiParseResult r = parse_api_request(ApiEndpoint::Completions, R"({"prompt":"x","include_stop_str_in_output":true})");
  ASSERT_TRUE(std::holds_alternative<ApiRequest>(r));
  EXPECT_TRUE(std::get<ApiRequest>(r).include_stop_str_in_output);
}

}  // namespace
}  // namespace th::server
