// A chat request's tools: `tools` and `tool_choice` (OpenAI's shapes) validated where they
// enter, the assistant messages' `tool_calls` made ready for templates, and the JSON schema a
// grammar engine would enforce for `required` or a named function.
#pragma once

#include <cstdint>
#include <optional>
#include <variant>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/http_response.h"
#include "server/tool_call_parser.h"

namespace th::server {

enum class ToolChoice : uint8_t {
  Auto,      // the model may call any tool or answer
  None,      // tools are neither rendered nor parsed: a plain chat
  Required,  // the model should call one or more tools
  Named      // the model should call `ToolRequest::named`
};

struct ToolRequest {
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // as sent, validated (empty: none)
  ToolChoice choice = ToolChoice::Auto;
  std::string named;       // with ToolChoice::Named
  bool parallel = true;    // parallel_tool_calls: false keeps the first call only

  /// @brief Tools are rendered into the prompt and the output parsed for calls.
  bool active() const { return !tools.empty() && choice != ToolChoice::None; }
  /// @brief The functions a call may name: the named one, or every tool's.
  std::vector<std::string> callable() const;
};

/// @brief Limits on what a request's tools may be.
inline constexpr size_t kMaxTools = 128;             // OpenAI's limit
inline constexpr size_t kMaxToolNameBytes = 64;      // OpenAI's: [a-zA-Z0-9_-]{1,64}

/// @brief Reads `tools` and `tool_choice` (either may be null: absent) into *out, and checks
/// the `tool_calls` of assistant messages and the `tool_call_id` of tool messages in
/// `messages`, turning each call's `arguments` given as a JSON string into the object
/// templates expect (`tool_call.arguments | tojson`, as vLLM does). A 400 naming the field
/// otherwise ("tools[1].function.name", "tool_choice", "messages[2].tool_calls[0]").
std::optional<http::ApiError> read_tool_fields(const nlohmann::ordered_json* tools, const nlohmann::ordered_json* tool_choice,
                                               nlohmann::ordered_json& messages, ToolRequest* out);

/// @brief The JSON schema of one call the request demands: for Named, {"name": const, `args_key`:
/// that function's parameters}; for Required, anyOf over the tools; nullopt for Auto and None
/// (nothing to enforce). `args_key` is the format's ("arguments"; Llama 3's "parameters").
std::optional<nlohmann::ordered_json> tool_call_schema(const ToolRequest& r, const std::string& args_key = "arguments");

/// @brief The GBNF grammar a demanded call's output follows in `format` (Hermes: one or, with
/// parallel_tool_calls, more `<tool_call>` blocks; Llama 3: one JSON call; Mistral:
/// `[TOOL_CALLS]` and an array of one or more calls); nullopt when nothing is demanded. A
/// function whose parameters the schema compiler refuses is a 400 naming
/// "tools[i].function.parameters". Functions marked "strict" compile in strict mode
/// (additionalProperties false unless said) when every callable one is.
std::variant<std::optional<std::string>, http::ApiError> tool_call_gbnf(const ToolRequest& r, ToolCallFormat format);

}  // namespace th::server
