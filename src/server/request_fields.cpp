#include "server/request_fields.h"

#include <algorithm>
#include <string>
#include <vector>

#include "server/structured_output.h"

namespace th::server {

namespace {

using Json = nlohmann::ordered_json;

http::ApiError refuse(std::string_view name, std::string_view why) {
  return http::ApiError{cat(name, " ", why), "", std::string(name), std::nullopt};
}

const Json* present(const RequestFields& fields, std::string_view name) {
  auto it = fields.find(name);
  return it == fields.end() || it->second->is_null() ? nullptr : it->second;
}

// Fields whose meaning is not implemented, with why; their "off" values (null, absent,
// and for objects {}) pass.
struct NotImplemented {
  std::string_view name;
  std::string_view why;
};
constexpr NotImplemented kNotImplemented[] = {
    {"prompt_logprobs", "is not supported (no prompt logprobs)"},
};

std::string_view path_of(ApiEndpoint e) {
  switch (e) {
    case ApiEndpoint::Completions: return "/v1/completions";
    case ApiEndpoint::ChatCompletions: return "/v1/chat/completions";
    case ApiEndpoint::Generate: return "/v1/generate";
  }
  return "this endpoint";
}

std::optional<http::ApiError> read_bool(const RequestFields& fields, std::string_view name, bool* out) {
  const Json* v = present(fields, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return refuse(name, "must be true or false");
  *out = v->get<bool>();
  return std::nullopt;
}

// vLLM's: end-of-generation and stop tokens are masked until min_tokens are generated.
std::optional<http::ApiError> read_min_tokens(const RequestFields& fields, ApiRequest& r, const ApiRequestLimits& limits) {
  const Json* v = present(fields, "min_tokens");
  if (!v) return std::nullopt;
  if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > limits.max_tokens)
    return refuse("min_tokens", cat("must be an integer from 0 to ", limits.max_tokens));
  r.min_tokens = v->get<int64_t>();
  if (r.max_tokens != -1 && r.min_tokens > r.max_tokens)
    return refuse("min_tokens", cat("is ", r.min_tokens, " but max_tokens is ", r.max_tokens, ": it must not be larger"));
  return std::nullopt;
}

// Template variables (vLLM's and llama-server's chat_template_kwargs, e.g. enable_thinking).
// The names the service sets itself are refused rather than silently overridden either way.
std::optional<http::ApiError> read_template_kwargs(ApiEndpoint endpoint, const RequestFields& fields, ApiRequest& r) {
  const Json* v = present(fields, "chat_template_kwargs");
  if (!v) return std::nullopt;
  if (!v->is_object()) return refuse("chat_template_kwargs", "must be an object of template variables");
  if (endpoint != ApiEndpoint::ChatCompletions && !v->empty())
    return refuse("chat_template_kwargs", "is only for /v1/chat/completions (no template renders a prompt here)");
  for (const auto& [key, value] : v->items()) {
    for (std::string_view reserved : {"messages", "add_generation_prompt", "bos_token", "eos_token", "tools"})
      if (key == reserved)
        return refuse(cat("chat_template_kwargs.", key), "is set by the server (use the request's own field)");
  }
  r.chat_template_kwargs = *v;
  return std::nullopt;
}

}  // namespace

std::optional<http::ApiError> read_request_extras(ApiEndpoint endpoint, const RequestFields& fields,
                                                  const std::unordered_set<std::string_view>& asked, ApiRequest& r,
                                                  const ApiRequestLimits& limits) {
  // llama-server's max_tokens; -1 there means "until the context is full", as no max_tokens here.
  if (const Json* v = present(fields, "n_predict")) {
    if (!v->is_number_integer() || v->get<int64_t>() == 0 || v->get<int64_t>() < -1 || v->get<int64_t>() > limits.max_tokens)
      return refuse("n_predict", cat("must be -1 (no limit) or an integer from 1 to ", limits.max_tokens));
    const int64_t n = v->get<int64_t>();
    if (r.max_tokens != -1 && n != r.max_tokens)
      return refuse("n_predict", cat("is ", n, " but max_tokens is ", r.max_tokens, ": give one of them, or the same value"));
    if (n > 0) r.max_tokens = n;
  }
  if (auto e = read_bool(fields, "include_stop_str_in_output", &r.include_stop_str_in_output)) return e;
  // The text leaves special tokens out (vLLM's default, true); rendering them is not implemented.
  bool skip_special = true;
  if (auto e = read_bool(fields, "skip_special_tokens", &skip_special)) return e;
  if (!skip_special) return refuse("skip_special_tokens", "is not supported except true: special tokens are left out of the text");
  for (const NotImplemented& n : kNotImplemented) {
    const Json* v = present(fields, n.name);
    if (!v) continue;
    const bool off = (v->is_object() && v->empty()) || (n.name == "prompt_logprobs" && v->is_boolean() && !v->get<bool>());
    if (!off) return refuse(n.name, n.why);
  }
  if (auto e = read_structured_output(fields, r)) return e;
  if (auto e = read_min_tokens(fields, r, limits)) return e;
  if (auto e = read_template_kwargs(endpoint, fields, r)) return e;
  if (auto e = read_bool(fields, "parallel_tool_calls", &r.tools.parallel)) return e;
  // OpenAI's fields that change nothing here at the values clients send by default.
  if (const Json* v = present(fields, "store"); v && !(v->is_boolean() && !v->get<bool>()))
    return refuse("store", "is not supported except false: nothing is stored");
  if (const Json* v = present(fields, "metadata"); v && !(v->is_object() && v->empty()))
    return refuse("metadata", "is not supported: it belongs to stored completions, and nothing is stored");
  if (const Json* v = present(fields, "service_tier"); v && !(v->is_string() && (*v == "auto" || *v == "default")))
    return refuse("service_tier", "is not supported except \"auto\" or \"default\": there is one tier");
  static constexpr std::string_view kRead[] = {"n_predict",  "include_stop_str_in_output", "skip_special_tokens",
                                               "parallel_tool_calls", "store", "metadata", "service_tier", "min_tokens",
                                               "chat_template_kwargs"};
  std::vector<std::string_view> unknown;
  for (const auto& [name, value] : fields) {
    if (value->is_null() || asked.count(name)) continue;  // null means absent
    bool known = false;
    for (std::string_view k : kRead) known = known || k == name;
    for (const NotImplemented& n : kNotImplemented) known = known || n.name == name;
    for (std::string_view k : kStructuredOutputFields) known = known || k == name;
    if (!known) unknown.push_back(name);
  }
  if (unknown.empty()) return std::nullopt;
  // Sorted, so that the field named does not depend on hashing; the first few are listed.
  std::sort(unknown.begin(), unknown.end());
  // A field named "" is named by its quotes: an error's param is never empty.
  auto field = [](std::string_view name) { return name.empty() ? std::string("\"\"") : one_line(name); };
  std::string also;
  for (size_t i = 1; i < unknown.size() && i < 4; ++i) also += cat(i == 1 ? " (also " : ", ", field(unknown[i]));
  if (!also.empty()) also += unknown.size() > 4 ? ", ...)" : ")";
  return refuse(field(unknown[0]), cat("is not a field of ", path_of(endpoint), " here", also,
                                       ": it would be ignored, so it is refused"));
}

}  // namespace th::server
