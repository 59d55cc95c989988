#include "client/stream_resume.h"

#include <climits>

#include <nlohmann/json.hpp>

namespace th::client {

namespace {

using json = nlohmann::ordered_json;

// A chunk is read only when it nests at most this deep (the cell's own request
// limit): nlohmann's DOM is freed and dumped recursively, so a server sending
// 100,000 levels of '[' would overflow the caller's stack (the router's #15).
constexpr int kMaxDepth = 64;

bool nesting_within(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

json parse_object(std::string_view text) {
  if (!nesting_within(text, kMaxDepth)) return json();
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : json();
}

const json* member(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

bool is_true(const json& obj, const char* key) {
  const json* v = member(obj, key);
  return v && v->is_boolean() && v->get<bool>();
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool append_ids(const json& v, std::vector<int32_t>& out) {
  if (!v.is_array()) return false;
  for (const json& id : v) {
    if (!id.is_number_integer()) return false;
    const int64_t x = id.get<int64_t>();
    if (x < 0 || x > INT32_MAX) return false;
    out.push_back(static_cast<int32_t>(x));
  }
  return true;
}

std::string text_of(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

StreamRequest prepare_stream_request(std::string_view path, std::string_view body, uint64_t seed_if_none) {
  StreamRequest q;
  q.body = std::string(body);
  const bool chat = ends_with(path, "/chat/completions");
  if (!chat && !ends_with(path, "/completions")) return q;
  json j = parse_object(body);
  if (!j.is_object()) return q;
  q.wants_ids = is_true(j, "return_token_ids");
  const json* n = member(j, "n");
  const json* prompt = member(j, "prompt");
  // A list of prompts (strings, or lists of ids) is several streams in one; a list of ids is one prompt.
  const bool several_prompts = !chat && prompt && prompt->is_array() && !prompt->empty() && !(*prompt)[0].is_number();
  q.movable = is_true(j, "stream") && (!n || (n->is_number_integer() && n->get<int64_t>() == 1)) && !several_prompts &&
              !is_true(j, "echo") && !member(j, "continuation");
  if (!q.movable) return q;
  if (!member(j, "seed")) j["seed"] = static_cast<int64_t>(seed_if_none & 0x7fffffff);
  j["return_token_ids"] = true;
  q.body = text_of(j);
  return q;
}

std::optional<std::string> rewrite_event(std::string_view payload, const StreamRequest& q, StreamProgress& p) {
  if (payload == "[DONE]") {
    p.done = true;
    ++p.events;
    return std::string(payload);
  }
  if (!q.movable) {
    ++p.events;
    return std::string(payload);
  }
  json j = parse_object(payload);
  if (!j.is_object()) {
    p.unreadable = true;  // passed on as it came; the stream can no longer move
    ++p.events;
    return std::string(payload);
  }
  if (member(j, "error")) p.error_event = true;
  bool drop = false;
  if (auto choices = j.find("choices"); choices != j.end() && choices->is_array()) {
    for (json& c : *choices) {
      if (!c.is_object()) continue;
      if (auto ids = c.find("prompt_token_ids"); ids != c.end()) {
        std::vector<int32_t> prompt;
        if (append_ids(*ids, prompt) && !prompt.empty()) p.prompt_ids = std::move(prompt);
        else p.unreadable = true;
        if (!q.wants_ids) c.erase(ids);
      }
      if (auto ids = c.find("token_ids"); ids != c.end()) {
        if (!append_ids(*ids, p.generated)) p.unreadable = true;
        if (!q.wants_ids) c.erase(ids);
      }
      if (const json* text = member(c, "text"); text && text->is_string())
        p.text_bytes += static_cast<int64_t>(text->get_ref<const std::string&>().size());
      if (const json* delta = member(c, "delta"); delta && delta->is_object()) {
        if (const json* content = member(*delta, "content"); content && content->is_string())
          p.text_bytes += static_cast<int64_t>(content->get_ref<const std::string&>().size());
        if (delta->contains("role")) {
          drop = p.role_sent;  // an endpoint that started the stream over sends it again
          p.role_sent = true;
        }
      }
      if (member(c, "finish_reason")) p.finished = true;
    }
  }
  if (drop) return std::nullopt;
  if (p.id.empty() && p.created.empty()) {
    if (const json* id = member(j, "id")) p.id = text_of(*id);
    if (const json* created = member(j, "created")) p.created = text_of(*created);
  } else {
    if (j.contains("id") && !p.id.empty()) j["id"] = json::parse(p.id);
    if (j.contains("created") && !p.created.empty()) j["created"] = json::parse(p.created);
  }
  ++p.events;
  return text_of(j);
}

bool can_resume(const StreamRequest& q, const StreamProgress& p) {
  if (!q.movable || p.unreadable || p.error_event || p.done) return false;
  // Generated ids without the prompt's cannot be continued; without either, the request starts over.
  return !p.prompt_ids.empty() || (p.generated.empty() && p.text_bytes == 0);
}

std::string resume_body(const StreamRequest& q, const StreamProgress& p) {
  if (p.prompt_ids.empty()) return q.body;
  json b = parse_object(q.body);
  b["continuation"] = {{"prompt_token_ids", p.prompt_ids}, {"token_ids", p.generated}, {"text_bytes", p.text_bytes}};
  return text_of(b);
}

}  // namespace th::client
