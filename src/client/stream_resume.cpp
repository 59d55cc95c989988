#include "client/stream_resume.h"

#include <algorithm>
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

int64_t choices_per_prompt(const json& body) {
  const json* n = member(body, "n");
  return n && n->is_number_integer() ? std::clamp<int64_t>(n->get<int64_t>(), 1, 1024) : 1;
}

size_t prompt_count(const json& body, bool chat) {
  if (chat) return 1;
  const json* p = member(body, "prompt");
  if (!p || !p->is_array() || p->empty()) return 1;
  return (*p)[0].is_number() ? 1 : p->size();
}

bool move_chunk(json& chunk, int64_t index) {
  if (member(chunk, "usage")) return false;
  if (auto choices = chunk.find("choices"); choices != chunk.end() && choices->is_array())
    for (json& c : *choices)
      if (c.is_object()) c["index"] = index;
  return true;
}

json choice_body(json body, int64_t n, size_t prompts, const StreamProgress& p, int64_t index) {
  n = std::max<int64_t>(n, 1);
  const int64_t prompt = index / n, place = index % n;
  if (prompts > 1) {
    json* list = body.contains("prompt") ? &body["prompt"] : nullptr;
    if (list && list->is_array() && static_cast<size_t>(prompt) < list->size())
      body["prompt"] = json((*list)[static_cast<size_t>(prompt)]);
  }
  body["n"] = 1;
  body.erase("best_of");  // the server takes it only equal to n
  // The server draws choice k of a prompt with seed + k (server/api_service.cpp, submit).
  if (auto seed = body.find("seed"); seed != body.end()) {
    if (seed->is_number_integer()) *seed = seed->get<int64_t>() + place;
    else if (seed->is_number_unsigned()) *seed = seed->get<uint64_t>() + static_cast<uint64_t>(place);
  }
  const ChoiceProgress& c = p.choice(index);
  if (!c.prompt_ids.empty()) set_continuation(body, c);
  return body;
}

json usage_chunk(int64_t n, size_t prompts, const StreamProgress& p) {
  int64_t prompt = 0, completion = 0;
  for (size_t k = 0; k < prompts; ++k) {  // once per prompt: its choices' first chunks all carry it
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<int32_t>& ids = p.choice(static_cast<int64_t>(k) * n + i).prompt_ids;
      if (ids.empty()) continue;
      prompt += static_cast<int64_t>(ids.size());
      break;
    }
  }
  for (const auto& [index, c] : p.choices) completion += static_cast<int64_t>(c.generated.size());
  json j = {{"id", p.id},
            {"object", p.object},
            {"created", p.created},
            {"model", p.model},
            {"choices", json::array()},
            {"usage", {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}}}};
  return j;
}

StreamRequest prepare_stream_request(std::string_view path, std::string_view body, uint64_t seed_if_none) {
  StreamRequest q;
  q.body = std::string(body);
  const bool chat = ends_with(path, "/chat/completions");
  if (!chat && !ends_with(path, "/completions")) return q;
  json j = parse_object(body);
  if (!j.is_object()) return q;
  q.wants_ids = is_true(j, "return_token_ids");
  q.movable = is_true(j, "stream") && !is_true(j, "echo") && !member(j, "continuation");
  if (!q.movable) return q;
  q.n = choices_per_prompt(j);
  q.prompts = prompt_count(j, chat);
  if (const json* so = member(j, "stream_options"); so && so->is_object()) q.include_usage = is_true(*so, "include_usage");
  if (!member(j, "seed")) j["seed"] = static_cast<int64_t>(seed_if_none & 0x7fffffff);
  j["return_token_ids"] = true;
  q.body = text_of(j);
  return q;
}

std::optional<std::string> rewrite_event(std::string_view payload, const StreamRequest& q, StreamProgress& p,
                                         int64_t moved_choice) {
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
  if (moved_choice >= 0 && !move_chunk(j, moved_choice)) return std::nullopt;
  if (!track_chunk(j, q.wants_ids, p)) return std::nullopt;
  ++p.events;
  return text_of(j);
}

bool can_resume(const StreamRequest& q, const StreamProgress& p) {
  if (!q.movable || p.unreadable || p.error_event || p.done) return false;
  // Generated ids without the prompt's cannot be continued; without either, the choice starts over.
  for (int64_t i = 0; i < q.choices(); ++i) {
    const ChoiceProgress& c = p.choice(i);
    if (!c.finished && c.prompt_ids.empty() && (!c.generated.empty() || c.text_bytes > 0)) return false;
  }
  return true;
}

std::string resume_body(const StreamRequest& q, const StreamProgress& p) {
  const ChoiceProgress& c = p.choice(0);
  if (c.prompt_ids.empty()) return q.body;
  json b = parse_object(q.body);
  set_continuation(b, c);
  return text_of(b);
}

std::string choice_resume_body(const StreamRequest& q, const StreamProgress& p, int64_t index) {
  if (q.choices() == 1) return resume_body(q, p);
  return text_of(choice_body(parse_object(q.body), q.n, q.prompts, p, index));
}

std::optional<std::string> final_usage_chunk(const StreamRequest& q, const StreamProgress& p) {
  if (!q.movable || !q.include_usage || p.usage_sent) return std::nullopt;
  return text_of(usage_chunk(q.n, q.prompts, p));
}

}  // namespace th::client
