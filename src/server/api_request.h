// The API's request bodies, parsed and validated once: POST /v1/completions,
// /v1/chat/completions (OpenAI's schemas, with vLLM's extensions) and
// /v1/generate (the native endpoint). Text is not tokenized here; the
// service does that with the model's tokenizer and chat template. Every field
// is checked for type, range and length, and a bad one is a 400 that names it
// (OpenAI's `param`), never a silent default.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "grammar/grammar.h"
#include "http/http_response.h"
#include "server/tool_request.h"

namespace th::server {

enum class ApiEndpoint : uint8_t {
  Completions,      // POST /v1/completions
  ChatCompletions,  // POST /v1/chat/completions
  Generate,         // POST /v1/generate (native)
};

/// @brief One prompt of a completions request: text, or token ids as sent.
struct ApiPrompt {
  bool is_tokens = false;
  std::string text;             // when !is_tokens (valid UTF-8)
  std::vector<int32_t> tokens;  // when is_tokens (each >= 0; the service checks < n_vocab)
};

/// @brief Native extension: resume, on this cell, a single-choice stream another cell
/// began (the router's migration). The cell takes prompt_token_ids as the prompt (no
/// template, no tokenizing), replays token_ids as already generated (they count against
/// max_tokens and feed the penalties, the stop strings and the detokenizer exactly as
/// on the first cell), and streams from byte text_bytes of the generated text on. With
/// the same seed, the counter-based sampler (keyed by position) draws what the first
/// cell would have: the client's stream goes on with no token lost or repeated.
struct ApiContinuation {
  std::vector<int32_t> prompt_token_ids;  // the prompt as the first cell tokenized it (not empty)
  std::vector<int32_t> token_ids;         // generated so far
  int64_t text_bytes = 0;                 // bytes of generated text the client already has
};

/// @brief Limits the parser enforces (beyond the HTTP server's body limit).
struct ApiRequestLimits {
  size_t max_prompts = 64;        // entries of a prompt list
  size_t max_messages = 1024;     // chat messages
  int32_t max_n = 16;             // choices per request
  int32_t max_logprobs = 20;      // completions' logprobs, chat's top_logprobs
  size_t max_stop = 4;            // stop strings (OpenAI's limit)
  size_t max_stop_bytes = 256;    // per stop string
  size_t max_stop_token_ids = 64;
  int64_t max_tokens = 1 << 20;   // a larger max_tokens is a 400
  size_t max_depth = 64;          // nested arrays/objects; checked while parsing, before any deeper value exists
  size_t max_model_bytes = 256;
  size_t max_user_bytes = 256;
  size_t max_cache_salt_bytes = 256;
};

/// @brief OpenAI's sampling defaults: temperature 1, top_p 1, top_k and min_p
/// off, no penalties (SamplingParams' own defaults are llama.cpp's CLI ones).
inline SamplingParams openai_sampling_defaults() {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

/// @brief A validated request. Sampling defaults are OpenAI's (temperature 1,
/// top_p 1, top_k off, min_p off, no penalties), not llama.cpp's CLI ones.
struct ApiRequest {
  ApiEndpoint endpoint = ApiEndpoint::Completions;
  std::string model;  // empty when absent: the served model (vLLM's and llama.cpp's leniency)

  // Completions and generate: one prompt or several (each gets n choices).
  std::vector<ApiPrompt> prompts;
  // Chat: the messages as sent (an array of objects, each with a string
  // "role"; "content" a string, null, or an array of {"type":"text","text":..}
  // parts, which the parser has joined into one string). Other keys
  // (name, tool_calls, ...) are kept for the template.
  nlohmann::ordered_json messages;
  bool add_generation_prompt = true;  // chat (vLLM's extension)

  int64_t max_tokens = -1;  // -1: not given (completions: 16, as OpenAI; chat/generate: until the context is full)
  SamplingParams sampling = openai_sampling_defaults();  // temperature, top_p, top_k, min_p, repetition_penalty, presence/frequency_penalty, seed
  bool seed_given = false;  // else the service picks a random seed (and reports it on /v1/generate)
  std::vector<std::string> stop;         // stop strings, non-empty, at most max_stop
  std::vector<int32_t> stop_token_ids;   // vLLM's extension
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage (only with stream)
  // Completions: "logprobs": k in 0..max_logprobs. Chat: "logprobs": true and
  // "top_logprobs": k give k here; logprobs false/absent gives -1.
  int32_t logprobs = -1;
  bool echo = false;  // completions: the prompt is prepended to the text
  std::string user;
  bool ignore_eos = false;  // vLLM's extension
  bool include_stop_str_in_output = false;  // vLLM's extension: the stop string ends the text
  // vLLM's extension: requests share prefix-cache blocks only with the same salt (within
  // their tenant, which stays the outer namespace). Empty when absent; an empty string is a 400.
  std::string cache_salt;
  int32_t priority = 0;     // "high" | "normal" | "low" or an integer (lower = more important)
  bool priority_given = false;  // else the service asks for normal, or the key's cap when that is lower
  ComputeType compute_type = ComputeType::Auto;  // "auto" | "fp32" | "fp16" | "bf16" | "fp8" | "native"
  bool return_token_ids = false;  // native extension: token ids in responses and stream events
  // Native extension (the router's migration): only with n = 1, one prompt, a seed and
  // stream = true; see ApiContinuation.
  std::optional<ApiContinuation> continuation;
  // Chat: tools and tool_choice (tool_request.h); template variables from
  // chat_template_kwargs (an object, {} when absent).
  ToolRequest tools;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  int64_t min_tokens = 0;  // vLLM's: end-of-generation and stop tokens are masked until this many are generated
  // Structured output (structured_output.h): the compiled grammar every choice follows, and
  // the field that asked for it; null when none did.
  std::shared_ptr<const grammar::Grammar> grammar;
  std::string grammar_param;
};

/// @brief The request, or the 400 that says which field is wrong (param set).
using ApiParseResult = std::variant<ApiRequest, http::ApiError>;

/// @brief Text from a body (a key, a value) fit for a one-line error message: control bytes
/// become '?', and more than 64 bytes are cut at a UTF-8 character boundary, marked "...".
std::string one_line(std::string_view s);

/// @brief Parses and validates a request body for `endpoint`. A field that is
/// not honoured is refused by name (request_fields.h) and null means absent; a known field of the
/// wrong type or out of range, invalid JSON, invalid UTF-8, nesting deeper
/// than limits.max_depth, or a missing required field is an error. The
/// error's `param` is the field's path ("messages[2].content", "stop[1]"),
/// or none for the body as a whole; its message is one line. Linear in the
/// body's size.
ApiParseResult parse_api_request(ApiEndpoint endpoint, std::string_view body,
                                 const ApiRequestLimits& limits = {});

}  // namespace th::server
