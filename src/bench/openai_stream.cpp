#include "bench/openai_stream.h"

#include <nlohmann/json.hpp>

namespace th::bench {

namespace {

using nlohmann::json;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

const json* member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// The text of a chunk's first choice: completions' `text`, chat's `delta.content` (or a
// reasoning model's `delta.reasoning_content`, which is output all the same).
std::string_view chunk_text(const json& chunk) {
  const json* choices = member(chunk, "choices");
  if (!choices || !choices->is_array() || choices->empty()) return {};
  const json& c0 = (*choices)[0];
  if (const json* t = member(c0, "text"); t && t->is_string()) return t->get_ref<const std::string&>();
  if (const json* d = member(c0, "delta")) {
    for (const char* k : {"content", "reasoning_content"})
      if (const json* t = member(*d, k); t && t->is_string() && !t->get_ref<const std::string&>().empty())
        return t->get_ref<const std::string&>();
  }
  return {};
}

std::string one_line(std::string s, size_t max = 300) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

}  // namespace

bool is_chat_endpoint(const std::string& endpoint) {
  const std::string tail = "chat/completions";
  return endpoint.size() >= tail.size() && endpoint.compare(endpoint.size() - tail.size(), tail.size(), tail) == 0;
}

std::string_view sampling_of(const OpenAiTarget& t, int64_t index) {
  if (t.sampling == "mixed") return index % 2 == 0 ? "greedy" : "seeded";
  return t.sampling;
}

std::string openai_request_body(const BenchRequest& r, const OpenAiTarget& t) {
  json body = json::object();
  if (!t.model.empty()) body["model"] = t.model;
  if (is_chat_endpoint(t.endpoint))
    body["messages"] = json::array({{{"role", "user"}, {"content", r.prompt}}});
  else
    body["prompt"] = r.prompt;
  body["max_tokens"] = r.max_tokens;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  if (r.ignore_eos) body["ignore_eos"] = true;
  if (t.send_priority) body["priority"] = priority_value(r.priority);
  if (!t.compute_types.empty())
    body["compute_type"] = t.compute_types[static_cast<size_t>(r.index) % t.compute_types.size()];
  const std::string_view sampling = sampling_of(t, r.index);
  if (sampling == "greedy") body["temperature"] = 0;
  if (sampling == "seeded") {
    body["temperature"] = 1.0;
    // 31 bits: every server's seed field takes it.
    body["seed"] = static_cast<int64_t>((t.sampling_seed + static_cast<uint64_t>(r.index)) & 0x7fffffffu);
  }
  return body.dump();
}

RequestRecord run_openai_stream(const StreamFn& stream, const BenchRequest& r, const OpenAiTarget& t) {
  RequestRecord rec;
  rec.index = r.index;
  rec.priority = r.priority;
  const std::string body = openai_request_body(r, t);
  int64_t chunks = 0, usage_out = -1, usage_in = -1;
  std::string error;
  auto on_event = [&](std::string_view data) -> bool {
    const double now = monotonic_s();
    data = trim(data);
    if (data == "[DONE]") return true;
    if (data.empty()) return true;  // a keep-alive
    json j = json::parse(data.begin(), data.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      error = "the server sent an event that is not a JSON object: " + one_line(std::string(data), 120);
      return false;
    }
    if (const json* e = member(j, "error")) {
      const json* m = member(*e, "message");
      error = "the server sent an error: " + one_line(m && m->is_string() ? m->get<std::string>() : e->dump());
      return false;
    }
    // We never cancel (we read to the end), so a choice that ends "cancelled" was cut by the
    // server (a cell's engine stopped under it): not a completed request, whatever follows.
    if (const json* choices = member(j, "choices"); choices && choices->is_array() && !choices->empty()) {
      const json* why = member((*choices)[0], "finish_reason");
      if (why && why->is_string() && why->get_ref<const std::string&>() == "cancelled") {
        error = "the server ended the stream with finish_reason \"cancelled\" (the bench cancels nothing)";
        return false;
      }
    }
    if (const std::string_view text = chunk_text(j); !text.empty()) {
      if (t.keep_text) rec.text += text;
      if (chunks++ == 0) rec.first_token_s = now;
      rec.token_times_s.push_back(now);
    }
    if (const json* u = member(j, "usage")) {
      if (const json* c = member(*u, "completion_tokens"); c && c->is_number_integer()) usage_out = c->get<int64_t>();
      if (const json* p = member(*u, "prompt_tokens"); p && p->is_number_integer()) usage_in = p->get<int64_t>();
    }
    return true;
  };
  rec.send_s = monotonic_s();
  Status st = stream(t.endpoint, body, on_event);
  rec.end_s = monotonic_s();
  rec.output_tokens = usage_out >= 0 ? usage_out : chunks;
  rec.prompt_tokens = usage_in >= 0 ? usage_in : r.input_tokens_hint;
  if (!error.empty()) {
    rec.error = std::move(error);
  } else if (!st.ok()) {
    rec.error = one_line(st.message());
  } else if (chunks == 0) {
    rec.error = "the stream ended without any content";
  } else {
    rec.ok = true;
  }
  return rec;
}

}  // namespace th::bench
