// The request fields beyond OpenAI's core that clients of vLLM and llama-server send, and
// the rule that no field is ever silently ignored: each is honoured, or refused with a 400
// that names it. parse_api_request ends with read_request_extras.
#pragma once

#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "http/http_response.h"
#include "server/api_request.h"

namespace th::server {

/// @brief The body's fields by name (null values included).
using RequestFields = std::unordered_map<std::string_view, nlohmann::ordered_json*>;

/// @brief Reads n_predict (llama-server's max_tokens), include_stop_str_in_output,
/// skip_special_tokens, min_tokens, chat_template_kwargs and parallel_tool_calls into `r`
/// (after max_tokens was read), refuses what is not implemented (prompt_logprobs,
/// json_schema, grammar, ...), then refuses every field neither `asked` (the names the parser consulted) nor
/// read here. nullopt: the request stands.
std::optional<http::ApiError> read_request_extras(ApiEndpoint endpoint, const RequestFields& fields,
                                                  const std::unordered_set<std::string_view>& asked, ApiRequest& r,
                                                  const ApiRequestLimits& limits);

}  // namespace th::server
