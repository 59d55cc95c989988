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

std::string text_of(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

const ChoiceProgress& StreamProgress::choice(int64_t index) const {
  static const ChoiceProgress kNone;
  auto it = choices.find(index);
  return it == choices.end() ? kNone : it->second;
}

bool StreamProgress::all_finished(size_t count) const {
  for (size_t i = 0; i < count; ++i)
    if (!choice(static_cast<int64_t>(i)).finished) return false;
  return true;
}

bool append_token_ids(const json& v, std::vector<int32_t>& out) {
  if (!v.is_array()) return false;
  for (const json& id : v) {
    if (!id.is_number_integer()) return false;
    const int64_t x = id.get<int64_t>();
    if (x < 0 || x > INT32_MAX) return false;
    out.push_back(static_cast<int32_t>(x));
  }
  return true;
}

bool track_chunk(json& j, bool keep_ids, StreamProgress& p) {
  if (member(j, "error")) p.error_event = true;
  if (member(j, "usage")) p.usage_sent = true;
  bool drop = false;
  if (auto choices = j.find("choices"); choices != j.end() && choices->is_array()) {
    for (json& c : *choices) {
      if (!c.is_object()) continue;
      const json* index = member(c, "index");
      ChoiceProgress& cp = p.choices[index && index->is_number_integer() ? index->get<int64_t>() : 0];
      if (auto ids = c.find("prompt_token_ids"); ids != c.end()) {
        std::vector<int32_t> prompt;
        if (append_token_ids(*ids, prompt) && !prompt.empty()) cp.prompt_ids = std::move(prompt);
        else p.unreadable = true;
        if (!keep_ids) c.erase(ids);
      }
      if (auto ids = c.find("token_ids"); ids != c.end()) {
        if (!append_token_ids(*ids, cp.generated)) p.unreadable = true;
        if (!keep_ids) c.erase(ids);
      }
      if (const json* text = member(c, "text"); text && text->is_string())
        cp.text_bytes += static_cast<int64_t>(text->get_ref<const std::string&>().size());
      if (const json* delta = member(c, "delta"); delta && delta->is_object()) {
        if (const json* content = member(*delta, "content"); content && content->is_string())
          cp.text_bytes += static_cast<int64_t>(content->get_ref<const std::string&>().size());
        if (delta->contains("role")) {
          drop = drop || cp.role_sent;  // a server that started the stream over sends it again
          cp.role_sent = true;
        }
      }
      if (member(c, "finish_reason")) cp.finished = true;
    }
  }
  if (drop) return false;
  if (p.id.is_null() && p.created.is_null()) {
    if (const json* id = member(j, "id")) p.id = *id;
    if (const json* created = member(j, "created")) p.created = *created;
    if (const json* object = member(j, "object")) p.object = *object;
    if (const json* model = member(j, "model")) p.model = *model;
  } else {
    if (j.contains("id")) j["id"] = p.id;
    if (j.contains("created")) j["created"] = p.created;
  }
  return true;
}

void set_continuation(json& body, const ChoiceProgress& c) {
  body["continuation"] = {{"prompt_token_ids", c.prompt_ids}, {"token_ids", c.generated}, {"text_bytes", c.text_bytes}};
}

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
  if (!track_chunk(j, q.wants_ids, p)) return std::nullopt;
  ++p.events;
  return text_of(j);
}

bool can_resume(const StreamRequest& q, const StreamProgress& p) {
  if (!q.movable || p.unreadable || p.error_event || p.done) return false;
  // Generated ids without the prompt's cannot be continued; without either, the request starts over.
  const ChoiceProgress& c = p.choice(0);
  return !c.prompt_ids.empty() || (c.generated.empty() && c.text_bytes == 0);
}

std::string resume_body(const StreamRequest& q, const StreamProgress& p) {
  const ChoiceProgress& c = p.choice(0);
  if (c.prompt_ids.empty()) return q.body;
  json b = parse_object(q.body);
  set_continuation(b, c);
  return text_of(b);
}

}  // namespace th::client
