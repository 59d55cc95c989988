#include "cluster/proxy_request.h"

#include <algorithm>
#include <climits>

#include "base/priority.h"
#include "cluster/bounded_json.h"
#include "cluster/prefix_hash.h"
#include "http/http_response.h"

namespace th::cluster {

namespace {

using json = nlohmann::ordered_json;

const json* member(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

bool is_true(const json& obj, const char* key) {
  const json* v = member(obj, key);
  return v && v->is_boolean() && v->get<bool>();
}

// The prompt's bytes, for prefix affinity: what requests sharing a prefix share.
std::string prompt_bytes(const json& body, bool chat) {
  std::string out;
  if (chat) {
    const json* m = member(body, "messages");
    if (!m || !m->is_array()) return out;
    for (const json& msg : *m) {
      if (!msg.is_object()) continue;
      const json* role = member(msg, "role");
      const json* content = member(msg, "content");
      if (role && role->is_string()) out += role->get_ref<const std::string&>();
      out += '\n';
      if (content && content->is_string()) out += content->get_ref<const std::string&>();
      out += '\n';
    }
    return out;
  }
  const json* p = member(body, "prompt");
  if (!p) return out;
  if (p->is_string()) return p->get<std::string>();
  if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
    for (const json& t : *p) {
      const int64_t v = t.is_number_integer() ? t.get<int64_t>() : 0;
      out.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
  }
  return out;
}

int32_t priority_of(const json& body) {
  const json* p = member(body, "priority");
  if (!p) return 0;
  if (p->is_string()) return priority_from_name(p->get_ref<const std::string&>()).value_or(0);
  if (p->is_number_integer())
    return static_cast<int32_t>(std::clamp<int64_t>(p->get<int64_t>(), INT32_MIN, INT32_MAX));
  return 0;
}

int64_t int_or(const json& body, const char* key, int64_t fallback) {
  const json* v = member(body, key);
  return v && v->is_number_integer() ? v->get<int64_t>() : fallback;
}

size_t prompt_count(const json& body, bool chat) {
  if (chat) return 1;
  const json* p = member(body, "prompt");
  if (!p || !p->is_array() || p->empty()) return 1;
  return (*p)[0].is_number() ? 1 : p->size();
}

// Appends the token ids of `v` to `out`; false when `v` is not an array of ids.
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

// A continuation the router can extend: prompt ids (not empty), generated ids and text bytes
// (both optional). Anything else is not moved; the cell refuses it with its own 400.
bool read_continuation(const json& c, ProxyRequest& q) {
  if (!c.is_object()) return false;
  const json* prompt = member(c, "prompt_token_ids");
  if (!prompt || !append_ids(*prompt, q.continued_prompt_ids) || q.continued_prompt_ids.empty()) return false;
  if (const json* ids = member(c, "token_ids"); ids && !append_ids(*ids, q.continued_ids)) return false;
  if (const json* t = member(c, "text_bytes")) {
    if (!t->is_number_integer() || t->get<int64_t>() < 0 || t->get<int64_t>() > INT32_MAX) return false;
    q.continued_text_bytes = t->get<int64_t>();
  }
  return true;
}

}  // namespace

std::string_view endpoint_label(ProxyEndpoint e) {
  switch (e) {
    case ProxyEndpoint::kCompletions: return "completions";
    case ProxyEndpoint::kChat: return "chat";
    case ProxyEndpoint::kGenerate: return "generate";
  }
  return "?";
}

Result<ProxyRequest> inspect_request(ProxyEndpoint endpoint, std::string_view body, uint64_t seed_if_none) {
  ProxyRequest q;
  q.endpoint = endpoint;
  Result<json> parsed = parse_ordered_json_bounded(body, kRequestBodyLimits);
  if (!parsed.ok()) return Status::errorf("the body must be a JSON object: ", parsed.message());
  if (!parsed->is_object()) return Status::error("the body must be a JSON object");
  q.body = std::move(*parsed);
  const bool chat = endpoint == ProxyEndpoint::kChat;
  q.stream = is_true(q.body, "stream");
  q.wants_ids = endpoint == ProxyEndpoint::kGenerate || is_true(q.body, "return_token_ids");
  if (!member(q.body, "seed")) q.body["seed"] = static_cast<int64_t>(seed_if_none & 0x7fffffff);
  const json* continuation = member(q.body, "continuation");
  q.movable = q.stream && int_or(q.body, "n", 1) == 1 && prompt_count(q.body, chat) == 1 && !is_true(q.body, "echo") &&
              (!continuation || read_continuation(*continuation, q));
  if (!q.movable) {
    q.continued_prompt_ids.clear();
    q.continued_ids.clear();
    q.continued_text_bytes = 0;
  }
  if (q.movable) q.body["return_token_ids"] = true;
  const std::string bytes = prompt_bytes(q.body, chat);
  q.route.prefix_blocks = prefix_block_hashes(bytes);
  q.route.priority = priority_of(q.body);
  const int64_t max_tokens = std::clamp<int64_t>(int_or(q.body, "max_tokens", 256), 1, 1 << 20);
  const int64_t choices = std::clamp<int64_t>(int_or(q.body, "n", 1), 1, 1024) * static_cast<int64_t>(prompt_count(q.body, chat));
  q.route.cost_tokens = static_cast<int64_t>(bytes.size() / 4) + max_tokens * choices;
  return q;
}

std::optional<std::string> rewrite_chunk(std::string_view payload, const ProxyRequest& request, StreamSnapshot& snap) {
  if (payload == "[DONE]") {
    snap.done = true;
    return std::nullopt;
  }
  Result<json> parsed = parse_ordered_json_bounded(payload, kCellAnswerLimits);
  if (!parsed.ok() || !parsed->is_object()) {
    snap.invalid = parsed.ok() ? "a chunk that is not a JSON object" : cat("a chunk that is ", parsed.message());
    return std::nullopt;
  }
  json& j = *parsed;
  if (member(j, "error")) snap.upstream_error = true;
  bool drop = false;
  if (auto choices = j.find("choices"); choices != j.end() && choices->is_array()) {
    for (json& c : *choices) {
      if (!c.is_object()) continue;
      if (auto p = c.find("prompt_token_ids"); p != c.end()) {
        if (request.movable) {
          std::vector<int32_t> ids;
          if (append_ids(*p, ids) && !ids.empty()) snap.prompt_ids = std::move(ids);
          else snap.ids_broken = true;
        }
        if (!request.wants_ids) c.erase(p);
      }
      if (auto ids = c.find("token_ids"); ids != c.end()) {
        if (request.movable && !append_ids(*ids, snap.generated)) snap.ids_broken = true;
        if (!request.wants_ids) c.erase(ids);
      }
      if (const json* text = member(c, "text"); text && text->is_string())
        snap.text_bytes += static_cast<int64_t>(text->get_ref<const std::string&>().size());
      if (const json* delta = member(c, "delta"); delta && delta->is_object()) {
        if (const json* content = member(*delta, "content"); content && content->is_string())
          snap.text_bytes += static_cast<int64_t>(content->get_ref<const std::string&>().size());
        if (delta->contains("role")) {
          drop = snap.role_sent;  // a cell that restarted the stream sends it again
          snap.role_sent = true;
        }
      }
      if (member(c, "finish_reason")) snap.finished = true;
    }
  }
  if (drop) return std::nullopt;
  if (snap.id.is_null() && snap.created.is_null()) {
    if (const json* id = member(j, "id")) snap.id = *id;
    if (const json* created = member(j, "created")) snap.created = *created;
  } else {
    if (j.contains("id")) j["id"] = snap.id;
    if (j.contains("created")) j["created"] = snap.created;
  }
  return http::json_text(j);
}

Status check_cell_answer(int status, std::string_view body) {
  if (status < 200 || status > 599) return Status::errorf("status ", status, " is not an answer");
  Result<json> parsed = parse_ordered_json_bounded(body, kCellAnswerLimits);
  if (!parsed.ok()) return Status::errorf("a body that is ", parsed.message());
  return ok_status();
}

StreamSnapshot start_snapshot(const ProxyRequest& request) {
  StreamSnapshot s;
  s.prompt_ids = request.continued_prompt_ids;
  s.generated = request.continued_ids;
  s.text_bytes = request.continued_text_bytes;
  return s;
}

bool resumable(const ProxyRequest& request, const StreamSnapshot& snap) {
  return request.movable && !snap.ids_broken && !snap.upstream_error;
}

std::string resume_body(const ProxyRequest& request, const StreamSnapshot& snap) {
  if (snap.prompt_ids.empty()) return http::json_text(request.body);
  json b = request.body;
  b["continuation"] = {{"prompt_token_ids", snap.prompt_ids}, {"token_ids", snap.generated}, {"text_bytes", snap.text_bytes}};
  return http::json_text(b);
}

}  // namespace th::cluster
