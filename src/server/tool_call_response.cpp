#include "server/tool_call_response.h"

#include <functional>

namespace th::server {

namespace {

using Json = nlohmann::ordered_json;

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Json call_json(const std::string& id, const ToolCall& t) {
  return Json{{"id", id}, {"type", "function"}, {"function", {{"name", t.name}, {"arguments", t.arguments}}}};
}

}  // namespace

std::string tool_call_id(const Call& c, const Choice& ch, size_t k) {
  static constexpr char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  uint64_t state = std::hash<std::string>{}(cat(c.response_id, "/", ch.index, "/", k));
  const bool mistral = c.tool_format == ToolCallFormat::Mistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlnum[splitmix64(state) % 62];
  return id;
}

Json tool_message(const Call& c, const Choice& ch, std::string* finish_reason) {
  std::unique_ptr<ToolCallParser> p = make_tool_call_parser(*c.tool_format, c.req.tools.callable());
  ToolParseStep out = parse_tool_calls(*p, ch.text);
  if (!c.req.tools.parallel && out.calls.size() > 1) out.calls.resize(1);
  Json m = {{"role", "assistant"}};
  m["content"] = out.content.empty() && !out.calls.empty() ? Json(nullptr) : Json(out.content);
  if (out.calls.empty()) return m;
  Json calls = Json::array();
  for (size_t k = 0; k < out.calls.size(); ++k) calls.push_back(call_json(tool_call_id(c, ch, k), out.calls[k]));
  m["tool_calls"] = std::move(calls);
  if (*finish_reason == "stop") *finish_reason = "tool_calls";
  return m;
}

void queue_tool_deltas(const Call& c, Choice& ch) {
  auto queue = [&](ToolParseStep step) {
    if (!step.content.empty()) ch.tool_deltas.push_back(Json{{"content", std::move(step.content)}});
    for (ToolCall& t : step.calls) {
      if (!c.req.tools.parallel && ch.tool_calls >= 1) break;
      const size_t k = ch.tool_calls++;
      Json head = call_json(tool_call_id(c, ch, k), ToolCall{t.name, ""});
      head["index"] = k;
      ch.tool_deltas.push_back(Json{{"tool_calls", Json::array({std::move(head)})}});
      ch.tool_deltas.push_back(
          Json{{"tool_calls", Json::array({Json{{"index", k}, {"function", {{"arguments", std::move(t.arguments)}}}}})}});
    }
  };
  if (ch.sent_text < ch.text.size()) {
    queue(ch.tool_parser->push(std::string_view(ch.text).substr(ch.sent_text)));
    ch.sent_text = ch.text.size();
  }
  if (ch.text_done && !ch.tool_parser_done) {
    ch.tool_parser_done = true;
    queue(ch.tool_parser->finish());
  }
}

std::vector<int32_t> tool_marker_ids(ToolCallFormat f, const Tokenizer& tok) {
  std::vector<int32_t> out;
  for (const std::string& marker : tool_call_marker_texts(f)) {
    std::vector<int32_t> ids = tok.encode(marker, /*add_special=*/false, /*parse_special=*/true);
    if (ids.size() == 1) out.push_back(ids[0]);
  }
  return out;
}

void start_tool_parsing(const Call& c, Choice& ch, const std::vector<int32_t>& markers) {
  ch.detok->render_control(markers);
  if (c.req.stream) ch.tool_parser = make_tool_call_parser(*c.tool_format, c.req.tools.callable());
}

std::string tool_finish_reason(const Choice& ch) {
  return ch.tool_calls > 0 && ch.finish_reason == "stop" ? "tool_calls" : ch.finish_reason;
}

}  // namespace th::server
