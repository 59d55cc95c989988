// Hermes/Qwen tool calls: <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, one
// call per block, blocks one after another (Qwen 2.5's template asks for exactly this).
// The closing tag is optional at the end of the output (models stop right after the JSON).
#include "server/tool_call_markup.h"

namespace th::server {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

class HermesToolParser final : public MarkedToolParser {
 public:
  explicit HermesToolParser(std::vector<std::string> functions)
      : MarkedToolParser(std::string(kOpen), /*bare_start=*/false, std::move(functions)) {}

 private:
  ToolBody parse_body(std::string_view body, bool final) const override {
    const size_t start = skip_json_space(body, 0);
    if (start == body.size()) return {final ? ToolBody::Malformed : ToolBody::NeedMore};
    const JsonScan scan = scan_json_value(body, start);
    if (scan.state == JsonExtent::Incomplete) return {final ? ToolBody::Malformed : ToolBody::NeedMore};
    ToolCall call;
    if (scan.state == JsonExtent::Invalid ||
        !read_tool_call(parse_tool_json(body.substr(start, scan.end - start)), functions(), {"arguments", "parameters"}, &call))
      return {ToolBody::Malformed};
    const size_t after = skip_json_space(body, scan.end);
    const std::string_view rest = body.substr(after);
    size_t consumed = scan.end;
    if (rest.substr(0, kClose.size()) == kClose) consumed = after + kClose.size();
    else if (!final && rest.size() < kClose.size() && kClose.substr(0, rest.size()) == rest) return {ToolBody::NeedMore};
    return {ToolBody::Calls, consumed, {std::move(call)}};
  }
};

}  // namespace

std::unique_ptr<ToolCallParser> make_hermes_tool_parser(std::vector<std::string> functions) {
  return std::make_unique<HermesToolParser>(std::move(functions));
}

}  // namespace th::server
