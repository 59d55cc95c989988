#include "server/tool_call_markup.h"

#include <algorithm>

namespace th::server {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The longest tail of `s` that is a proper prefix of `marker`: text that may yet become it.
size_t marker_prefix_tail(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace

size_t skip_json_space(std::string_view s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

JsonScan scan_json_value(std::string_view s, size_t pos) {
  if (pos >= s.size() || (s[pos] != '{' && s[pos] != '[')) return {JsonExtent::Invalid, 0};
  int depth = 0;
  bool in_string = false;
  for (size_t i = pos; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped byte; past the end means incomplete
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxToolJsonDepth) return {JsonExtent::Invalid, 0};
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return {JsonExtent::Complete, i + 1};
    }
  }
  return {JsonExtent::Incomplete, 0};
}

nlohmann::ordered_json parse_tool_json(std::string_view s) {
  return nlohmann::ordered_json::parse(s.begin(), s.end(), nullptr, /*allow_exceptions=*/false);
}

bool read_tool_call(const nlohmann::ordered_json& obj, const std::vector<std::string>& functions,
                    std::initializer_list<const char*> argument_keys, ToolCall* out) {
  if (!obj.is_object()) return false;
  auto name = obj.find("name");
  if (name == obj.end() || !name->is_string()) return false;
  const std::string& n = name->get_ref<const std::string&>();
  if (std::find(functions.begin(), functions.end(), n) == functions.end()) return false;
  std::string arguments = "{}";
  for (const char* key : argument_keys) {
    auto a = obj.find(key);
    if (a == obj.end()) continue;
    if (a->is_object()) arguments = a->dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    else if (a->is_string() && parse_tool_json(a->get_ref<const std::string&>()).is_object()) arguments = a->get<std::string>();
    else return false;  // what a client could not read back as an object
    break;
  }
  out->name = n;
  out->arguments = std::move(arguments);
  return true;
}

ToolParseStep MarkedToolParser::push(std::string_view text) {
  buf_.append(text);
  ToolParseStep out;
  run(out, false);
  return out;
}

ToolParseStep MarkedToolParser::finish() {
  ToolParseStep out;
  run(out, true);
  return out;
}

void MarkedToolParser::run(ToolParseStep& out, bool final) {
  for (;;) {
    if (drop_space_) {
      const size_t n = skip_json_space(buf_, 0);
      buf_.erase(0, n);
      if (buf_.empty()) return;  // more whitespace may follow
      drop_space_ = false;
    }
    if (!in_body_) {
      if (bare_) {
        const size_t first = skip_json_space(buf_, 0);
        if (first == buf_.size() && !final) return;  // only blanks so far: a call may follow
        bare_ = false;
        if (first < buf_.size() && buf_[first] == '{') {
          in_body_ = true;
          marked_ = false;
          continue;
        }
      }
      const size_t at = buf_.find(marker_);
      if (at == std::string::npos) {
        const size_t keep = final ? 0 : marker_prefix_tail(buf_, marker_);
        out.content.append(buf_, 0, buf_.size() - keep);
        buf_.erase(0, buf_.size() - keep);
        return;
      }
      out.content.append(buf_, 0, at);
      buf_.erase(0, at + marker_.size());
      in_body_ = true;
      marked_ = true;
    }
    ToolBody body = parse_body(buf_, final);
    if (body.state == ToolBody::NeedMore && !final) return;
    in_body_ = false;
    if (body.state == ToolBody::Calls) {
      for (ToolCall& c : body.calls) out.calls.push_back(std::move(c));
      buf_.erase(0, body.consumed);
      drop_space_ = true;
      continue;
    }
    // Not a call: the marker is content, and the body is read again as content.
    if (marked_) out.content += marker_;
    if (final && buf_.find(marker_) == std::string::npos) {
      out.content += buf_;
      buf_.clear();
      return;
    }
  }
}

}  // namespace th::server
