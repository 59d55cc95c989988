// libFuzzer target for parse_api_request. The first byte picks the endpoint
// (its value mod 3: completions, chat, generate) and, with its top bit set,
// small limits (so that every "at most" is reachable in a short input); the
// rest is the body. Whatever the body, the parser must not crash, and:
// an error is one line of valid UTF-8 with a non-empty param or none; an
// accepted request satisfies every rule the parser promises (ranges, counts,
// the prompt and message forms), so the service can trust it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "server/api_request.h"

namespace {

using th::server::ApiEndpoint;
using th::http::ApiError;
using th::server::ApiRequest;
using th::server::ApiRequestLimits;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "api_request_fuzz: %s\n", what);
  std::abort();
}

// Lead bytes and continuation counts only: enough to catch a cut character.
bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : 4;
    if (n == 4 || s.size() - i <= n) return false;
    for (size_t k = 1; k <= n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n + 1;
  }
  return true;
}

bool one_line(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) return false;
  return true;
}

void check_error(const ApiError& e) {
  if (e.message.empty()) die("error without a message");
  if (!one_line(e.message) || !valid_utf8(e.message)) die("message not one line of UTF-8");
  if (e.message.size() > 1024) die("message over 1 KiB");
  if (!e.type.empty()) die("a 400 with a type of its own");
  if (e.param && (e.param->empty() || !one_line(*e.param) || !valid_utf8(*e.param))) die("bad param");
}

void check_request(const ApiRequest& r, ApiEndpoint endpoint, const ApiRequestLimits& l) {
  if (r.endpoint != endpoint) die("endpoint changed");
  if (r.model.size() > l.max_model_bytes || !valid_utf8(r.model)) die("model");
  if (endpoint == ApiEndpoint::ChatCompletions) {
    if (!r.prompts.empty()) die("chat with prompts");
    if (!r.messages.is_array() || r.messages.empty() || r.messages.size() > l.max_messages) die("messages count");
    for (const auto& m : r.messages) {
      if (!m.is_object()) die("message not an object");
      auto role = m.find("role");
      if (role == m.end() || !role->is_string()) die("message without a string role");
      auto content = m.find("content");
      if (content != m.end() && !content->is_string() && !content->is_null()) die("content not joined");
    }
  } else {
    if (r.prompts.empty() || r.prompts.size() > l.max_prompts) die("prompt count");
    if (endpoint == ApiEndpoint::Generate && r.prompts.size() != 1) die("generate with several prompts");
    for (const auto& p : r.prompts) {
      if (p.is_tokens && p.tokens.empty()) die("empty token prompt");
      for (int32_t t : p.tokens)
        if (t < 0) die("negative token");
      if (!p.is_tokens && (!p.tokens.empty() || !valid_utf8(p.text))) die("text prompt");
    }
  }
  if (r.max_tokens != -1 && (r.max_tokens < 1 || r.max_tokens > l.max_tokens)) die("max_tokens");
  if (!r.sampling.validate().ok()) die("sampling params the sampler refuses");
  if (r.sampling.top_k < 0) die("negative top_k");
  if (r.stop.size() > l.max_stop) die("stop count");
  for (const auto& s : r.stop)
    if (s.empty() || s.size() > l.max_stop_bytes) die("stop string");
  if (r.stop_token_ids.size() > l.max_stop_token_ids) die("stop token count");
  for (int32_t t : r.stop_token_ids)
    if (t < 0) die("negative stop token");
  if (r.n < 1 || r.n > l.max_n) die("n");
  if (r.include_usage && !r.stream) die("include_usage without stream");
  if (r.logprobs < -1 || r.logprobs > l.max_logprobs) die("logprobs");
  if (r.user.size() > l.max_user_bytes) die("user");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto endpoint = static_cast<ApiEndpoint>(data[0] % 3);
  ApiRequestLimits limits;
  if (data[0] & 0x80) {
    limits.max_prompts = 2;
    limits.max_messages = 2;
    limits.max_n = 2;
    limits.max_logprobs = 2;
    limits.max_stop = 2;
    limits.max_stop_bytes = 4;
    limits.max_stop_token_ids = 2;
    limits.max_tokens = 100;
    limits.max_depth = 6;
    limits.max_model_bytes = 8;
    limits.max_user_bytes = 8;
  }
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto result = th::server::parse_api_request(endpoint, body, limits);
  if (const auto* e = std::get_if<ApiError>(&result))
    check_error(*e);
  else
    check_request(std::get<ApiRequest>(result), endpoint, limits);
  return 0;
}
