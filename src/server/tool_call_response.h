// Tool calls in OpenAI's wire format: a complete response's message.tool_calls, and a
// stream's tool-call deltas (the first for a call carries index, id, type and name with
// empty arguments; the next its arguments). Calls are found by the call's parser
// (tool_call_parser.h) on the choice's released text, the same way streamed or not.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "server/api_call.h"

namespace th::server {

/// @brief Call k of a choice's id: "call_" + 24 letters and digits, or 9 for Mistral (whose
/// template refuses other ids when the call comes back). Derived from the response id, the
/// choice and k: unique per response, the same in a stream and a whole response.
std::string tool_call_id(const Call& c, const Choice& ch, size_t k);

/// @brief The assistant message of a chat choice with tools: content (null when empty and
/// there are calls) and tool_calls; *finish_reason becomes "tool_calls" when there are calls
/// and the output ended on a stop.
nlohmann::ordered_json tool_message(const Call& c, const Choice& ch, std::string* finish_reason);

/// @brief A stream: the text released since the last call into ch.tool_parser, its content
/// and calls queued as deltas in ch.tool_deltas (the parser's end too, once the text is done).
void queue_tool_deltas(const Call& c, Choice& ch);

/// @brief The format's markers that are single tokens of `tok` (control tokens among them are
/// left out of text unless the detokenizer renders them).
std::vector<int32_t> tool_marker_ids(ToolCallFormat f, const Tokenizer& tok);

/// @brief A chat choice with tools: the markers rendered into its text and, for a stream, a
/// parser of its own.
void start_tool_parsing(const Call& c, Choice& ch, const std::vector<int32_t>& markers);

/// @brief The finish_reason a stream's last chunk says.
std::string tool_finish_reason(const Choice& ch);

}  // namespace th::server
