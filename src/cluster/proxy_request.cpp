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

// A continuation the router can extend: prompt ids (not empty), generated ids and text bytes
// (both optional). Anything else is not moved; the cell refuses it with its own 400.
bool read_continuation(const json& c, ProxyRequest& q) {
  if (!c.is_object()) return false;
  const json* prompt = member(c, "prompt_token_ids");
  if (!prompt || !client::append_token_ids(*prompt, q.continued_prompt_ids) || q.continued_prompt_ids.empty()) return false;
  if (const json* ids = member(c, "token_ids"); ids && !client::append_token_ids(*ids, q.continued_ids)) return false;
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
  q.n = client::choices_per_prompt(q.body);
  q.prompts = client::prompt_count(q.body, chat);
  if (const json* so = member(q.body, "stream_options"); so && so->is_object()) q.include_usage = is_true(*so, "include_usage");
  // A continuation is of one choice (the cell refuses it with n > 1 or several prompts).
  q.movable = q.stream && !is_true(q.body, "echo") &&
              (!continuation || (q.n == 1 && q.prompts == 1 && read_continuation(*continuation, q)));
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
  const int64_t choices = choice_count(q);
  q.route.cost_tokens = static_cast<int64_t>(bytes.size() / 4) + max_tokens * choices;
  return q;
}

std::optional<std::string> rewrite_chunk(std::string_view payload, const ProxyRequest& request, StreamSnapshot& snap,
                                         int64_t moved_choice) {
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
  if (moved_choice >= 0 && !client::move_chunk(j, moved_choice)) return std::nullopt;
  if (!client::track_chunk(j, request.wants_ids, snap)) return std::nullopt;
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
  if (request.continued_prompt_ids.empty()) return s;
  client::ChoiceProgress& c = s.choices[0];
  c.prompt_ids = request.continued_prompt_ids;
  c.generated = request.continued_ids;
  c.text_bytes = request.continued_text_bytes;
  return s;
}

bool resumable(const ProxyRequest& request, const StreamSnapshot& snap) {
  return request.movable && !snap.unreadable && !snap.error_event;
}

int64_t choice_count(const ProxyRequest& request) { return request.n * static_cast<int64_t>(request.prompts); }

std::string resume_body(const ProxyRequest& request, const StreamSnapshot& snap) {
  if (choice_count(request) != 1 || snap.choice(0).prompt_ids.empty()) return http::json_text(request.body);
  json b = request.body;
  client::set_continuation(b, snap.choice(0));
  return http::json_text(b);
}

std::string choice_resume_body(const ProxyRequest& request, const StreamSnapshot& snap, int64_t index) {
  if (choice_count(request) == 1) return resume_body(request, snap);
  return http::json_text(client::choice_body(request.body, request.n, request.prompts, snap, index));
}

std::optional<std::string> usage_chunk(const ProxyRequest& request, const StreamSnapshot& snap) {
  if (!request.include_usage || snap.usage_sent) return std::nullopt;
  return http::json_text(client::usage_chunk(request.n, request.prompts, snap));
}

}  // namespace th::cluster
