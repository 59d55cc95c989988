// Llama 3.1-3.3 JSON tool calls: {"name": "f", "parameters": {...}} as the whole answer
// (Meta's template asks for "a JSON for a function call ... in the format {"name": function
// name, "parameters": dictionary of argument name and its value}"), or after <|python_tag|>;
// several calls separated by ';' (Llama 3.2 does this). Built-in tools written as Python
// (`brave_search.call(query=...)`) are not calls here: they stay content.
#include "server/tool_call_markup.h"

namespace th::server {

namespace {

class Llama3ToolParser final : public MarkedToolParser {
 public:
  explicit Llama3ToolParser(std::vector<std::string> functions)
      : MarkedToolParser("<|python_tag|>", /*bare_start=*/true, std::move(functions)) {}

 private:
  ToolBody parse_body(std::string_view body, bool final) const override {
    ToolBody out{ToolBody::Calls};
    size_t at = skip_json_space(body, 0);
    for (;;) {
      if (at == body.size()) return {final && out.calls.empty() ? ToolBody::Malformed : ToolBody::NeedMore};
      const JsonScan scan = scan_json_value(body, at);
      if (scan.state == JsonExtent::Incomplete) return {final && out.calls.empty() ? ToolBody::Malformed : ToolBody::NeedMore};
      ToolCall call;
      if (scan.state == JsonExtent::Invalid ||
          !read_tool_call(parse_tool_json(body.substr(at, scan.end - at)), functions(), {"parameters", "arguments"}, &call))
        return out.calls.empty() ? ToolBody{ToolBody::Malformed} : out;
      out.calls.push_back(std::move(call));
      out.consumed = scan.end;
      const size_t next = skip_json_space(body, scan.end);
      if (next == body.size()) return final ? out : ToolBody{ToolBody::NeedMore};  // a ';' may follow
      if (body[next] != ';') return out;
      at = skip_json_space(body, next + 1);
      if (at == body.size() && final) return out;
    }
  }
};

}  // namespace

std::unique_ptr<ToolCallParser> make_llama3_tool_parser(std::vector<std::string> functions) {
  return std::make_unique<Llama3ToolParser>(std::move(functions));
}

}  // namespace th::server
