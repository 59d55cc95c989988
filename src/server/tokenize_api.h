// POST /tokenize and /detokenize in both shapes clients know: vLLM's
// ({"prompt"} or {"messages"} -> {"tokens", "count", "max_model_len"}; {"tokens"} ->
// {"prompt"}) and llama-server's ({"content"} -> {"tokens"}; {"tokens"} -> {"content"}).
// Either field name is taken; an answer carries both keys where the two differ. Pure
// functions of the body and the tokenizer: the route (keys, readiness) is the service's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "http/http_response.h"
#include "server/api_request.h"

namespace th {
class ChatTemplate;
class Tokenizer;
}  // namespace th

namespace th::server {

struct TokenizeContext {
  const Tokenizer* tok = nullptr;
  const ChatTemplate* chat = nullptr;
  int64_t max_model_len = 0;
  std::string_view model_name;  // a request naming another model is refused (404)
  const ApiRequestLimits* limits = nullptr;
};

/// @brief The answer: a JSON body (status 200), or the status and error to send.
struct TokenizeReply {
  int status = 200;
  nlohmann::ordered_json body;
  http::ApiError error;
};

/// @brief POST /tokenize's body to its answer.
TokenizeReply tokenize_request(std::string_view body, const TokenizeContext& ctx);
/// @brief POST /detokenize's body to its answer.
TokenizeReply detokenize_request(std::string_view body, const TokenizeContext& ctx);

}  // namespace th::server
