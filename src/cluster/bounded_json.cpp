#include "cluster/bounded_json.h"

namespace th::cluster {

Status check_json_limits(std::string_view text, JsonLimits limits) {
  if (text.size() > limits.max_bytes)
    return Status::errorf("JSON of ", text.size(), " bytes is over the limit of ", limits.max_bytes);
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (++depth > limits.max_depth)
          return Status::errorf("invalid JSON: arrays and objects nested deeper than ", limits.max_depth, " levels");
        break;
      case ']':
      case '}':
        // An unbalanced close is a syntax error the parse reports; the count stays >= 0.
        if (depth > 0) --depth;
        break;
      default: break;
    }
  }
  return ok_status();
}

namespace {

// For valid JSON the scan above sees exactly the parser's tokens (a '"' outside a
// string opens one, a '\' inside escapes the next byte), so a text the parse accepts
// nests no deeper than the scan counted.
template <typename J>
Result<J> parse_bounded(std::string_view text, JsonLimits limits) {
  if (Status s = check_json_limits(text, limits); !s.ok()) return s;
  J j = J::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::error("invalid JSON");
  return j;
}

}  // namespace

Result<nlohmann::json> parse_json_bounded(std::string_view text, JsonLimits limits) {
  return parse_bounded<nlohmann::json>(text, limits);
}

Result<nlohmann::ordered_json> parse_ordered_json_bounded(std::string_view text, JsonLimits limits) {
  return parse_bounded<nlohmann::ordered_json>(text, limits);
}

}  // namespace th::cluster
