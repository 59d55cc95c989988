#include "server/tool_call_parser.h"

namespace th::server {

// One per format, each in its own file.
std::unique_ptr<ToolCallParser> make_hermes_tool_parser(std::vector<std::string> functions);
std::unique_ptr<ToolCallParser> make_llama3_tool_parser(std::vector<std::string> functions);
std::unique_ptr<ToolCallParser> make_mistral_tool_parser(std::vector<std::string> functions);

std::string_view tool_call_format_name(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::Hermes: return "hermes";
    case ToolCallFormat::Llama3: return "llama3_json";
    case ToolCallFormat::Mistral: return "mistral";
  }
  return "?";
}

ToolCallFormat detect_tool_call_format(std::string_view t) {
  auto has = [t](std::string_view s) { return t.find(s) != std::string_view::npos; };
  if (has("[TOOL_CALLS]")) return ToolCallFormat::Mistral;
  if (has("<tool_call>")) return ToolCallFormat::Hermes;
  if (has("<|python_tag|>") || (has("<|start_header_id|>") && has("\"parameters\""))) return ToolCallFormat::Llama3;
  return ToolCallFormat::Hermes;
}

std::vector<std::string> tool_call_marker_texts(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::Hermes: return {"<tool_call>", "</tool_call>"};
    case ToolCallFormat::Llama3: return {"<|python_tag|>"};
    case ToolCallFormat::Mistral: return {"[TOOL_CALLS]"};
  }
  return {};
}

std::unique_ptr<ToolCallParser> make_tool_call_parser(ToolCallFormat format, std::vector<std::string> functions) {
  switch (format) {
    case ToolCallFormat::Hermes: return make_hermes_tool_parser(std::move(functions));
    case ToolCallFormat::Llama3: return make_llama3_tool_parser(std::move(functions));
    case ToolCallFormat::Mistral: return make_mistral_tool_parser(std::move(functions));
  }
  return nullptr;
}

ToolParseStep parse_tool_calls(ToolCallParser& parser, std::string_view text) {
  ToolParseStep all = parser.push(text);
  ToolParseStep end = parser.finish();
  all.content += end.content;
  for (ToolCall& c : end.calls) all.calls.push_back(std::move(c));
  return all;
}

}  // namespace th::server
