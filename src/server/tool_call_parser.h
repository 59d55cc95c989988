// Tool calls in a model's output: the formats models are trained on (Hermes/Qwen
// `<tool_call>{json}</tool_call>`, Llama 3.1's JSON `{"name": ..., "parameters": ...}` alone or
// after `<|python_tag|>`, Mistral's `[TOOL_CALLS][{...}]`), which one a chat template uses, and
// an incremental parser per format (hermes_tool_parser.cpp, llama3_tool_parser.cpp,
// mistral_tool_parser.cpp) that splits the text into content and complete calls.
//
// A call is released only once it is complete (its JSON closed, the name one of the allowed
// functions): anything that turns out malformed goes out as content instead, so a stream
// never sends a call it has to take back, and streaming and parsing the whole text at once
// give the same content and calls (tool_call_parser_test.cpp splits at every byte).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace th::server {

enum class ToolCallFormat : uint8_t {
  Hermes,  // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> (Qwen 2.5/3, Hermes)
  Llama3,  // {"name": ..., "parameters": {...}} at the start, or after <|python_tag|> (Llama 3.1-3.3)
  Mistral  // [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] (Mistral v0.3, Mistral Large 2407)
};

std::string_view tool_call_format_name(ToolCallFormat f);

/// @brief The format a chat template's model emits, found from the markers in the template's
/// text (as llama.cpp's common/chat does): "[TOOL_CALLS]" -> Mistral, "<|python_tag|>" or
/// Llama 3's header with "parameters" -> Llama3, otherwise Hermes (also the usual format of
/// templates that say "<tool_call>", and harmless where none appears: its marker is text).
ToolCallFormat detect_tool_call_format(std::string_view template_source);

/// @brief The marker texts of a format that a vocabulary may hold as control tokens, which
/// the detokenizer would otherwise leave out of the text (Llama's <|python_tag|>, Mistral's
/// [TOOL_CALLS]).
std::vector<std::string> tool_call_marker_texts(ToolCallFormat f);

/// @brief One complete call: the function's name and its arguments as JSON text (the model's
/// object printed compactly, or the model's string as it was).
struct ToolCall {
  std::string name;
  std::string arguments;
  bool operator==(const ToolCall&) const = default;
};

/// @brief What became final with the text pushed: content to release, calls completed.
struct ToolParseStep {
  std::string content;
  std::vector<ToolCall> calls;
};

class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;
  /// @brief Appends generated text; returns what is now certain. Text that could still be
  /// part of a marker or a call is held.
  virtual ToolParseStep push(std::string_view text) = 0;
  /// @brief The end of the output: a call left incomplete becomes content.
  virtual ToolParseStep finish() = 0;
};

/// @brief A parser for `format` that accepts calls to `functions` only (a call to any other
/// name is content). `functions` must not be empty.
std::unique_ptr<ToolCallParser> make_tool_call_parser(ToolCallFormat format, std::vector<std::string> functions);

/// @brief The whole output at once: push(text) then finish(), merged.
ToolParseStep parse_tool_calls(ToolCallParser& parser, std::string_view text);

}  // namespace th::server
