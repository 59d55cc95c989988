// The request fields that ask for structured output, read into a compiled
// grammar: OpenAI's response_format ({"type": "json_object"} and
// {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}),
// llama-server's json_schema and grammar (GBNF), vLLM's guided_json,
// guided_regex, guided_choice, guided_grammar and structured_outputs
// ({"json" | "regex" | "choice" | "grammar": ...}). At most one of them; a
// schema or grammar that does not compile is a 400 naming the field.
#pragma once

#include <optional>
#include <string_view>

#include "http/http_response.h"
#include "server/api_request.h"
#include "server/request_fields.h"
#include "server/tool_call_parser.h"

namespace th::server {

inline constexpr std::string_view kStructuredOutputFields[] = {
    "response_format", "json_schema", "grammar", "guided_json", "guided_regex", "guided_choice", "guided_grammar",
    "structured_outputs"};

/// @brief Sets r.grammar and r.grammar_param from whichever field asks for structured output.
std::optional<http::ApiError> read_structured_output(const RequestFields& fields, ApiRequest& r);

/// @brief tool_choice "required" or a named function, enforced: r.grammar becomes the calls'
/// grammar in the served template's `format` (tool_request.h's tool_call_gbnf), with
/// grammar_param "tool_choice". Nothing for auto and none. A 400 when the request also asks
/// for structured output (the output is the calls, not a document of that schema).
std::optional<http::ApiError> enforce_tool_choice(ApiRequest& r, ToolCallFormat format);

}  // namespace th::server
