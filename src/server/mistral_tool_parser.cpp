// Mistral tool calls: [TOOL_CALLS] then a JSON array of {"name": "f", "arguments": {...}}
// (v0.3's template renders past calls so; its tokenizer has [TOOL_CALLS] as a control
// token, which the detokenizer renders for this parser). The later form
// `[TOOL_CALLS]name[ARGS]{...}` (tokenizer v11) is not read: it stays content.
#include "server/tool_call_markup.h"

namespace th::server {

namespace {

class MistralToolParser final : public MarkedToolParser {
 public:
  explicit MistralToolParser(std::vector<std::string> functions)
      : MarkedToolParser("[TOOL_CALLS]", /*bare_start=*/false, std::move(functions)) {}

 private:
  ToolBody parse_body(std::string_view body, bool final) const override {
    const size_t start = skip_json_space(body, 0);
    if (start == body.size()) return {final ? ToolBody::Malformed : ToolBody::NeedMore};
    const JsonScan scan = scan_json_value(body, start);
    if (scan.state == JsonExtent::Incomplete) return {final ? ToolBody::Malformed : ToolBody::NeedMore};
    if (scan.state == JsonExtent::Invalid || body[start] != '[') return {ToolBody::Malformed};
    const nlohmann::ordered_json list = parse_tool_json(body.substr(start, scan.end - start));
    if (!list.is_array() || list.empty()) return {ToolBody::Malformed};
    ToolBody out{ToolBody::Calls, scan.end, {}};
    for (const auto& item : list) {
      ToolCall call;
      if (!read_tool_call(item, functions(), {"arguments"}, &call)) return {ToolBody::Malformed};
      out.calls.push_back(std::move(call));
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<ToolCallParser> make_mistral_tool_parser(std::vector<std::string> functions) {
  return std::make_unique<MistralToolParser>(std::move(functions));
}

}  // namespace th::server
