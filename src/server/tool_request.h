// A chat request's tools: `tools` and `tool_choice` (OpenAI's shapes) validated where they
// enter, the assistant messages' `tool_calls` made ready for templates, and the JSON schema a
// grammar engine would enforce for `required` or a named function.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/http_response.h"

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

/// @brief The hook for the grammar engine: the JSON schema that a call the request demands
/// must match — for Named, {"name": const, "arguments": that function's parameters}; for
/// Required, anyOf over the tools (an array of one or more when parallel); nullopt for Auto
/// and None (nothing to enforce). The schema describes the call object; each format wraps it
/// in its own markers (tool_call_parser.h).
std::optional<nlohmann::ordered_json> tool_call_schema(const ToolRequest& r);

}  // namespace th::server
