// OpenAI's wire format for a Call: the ids and object names, a stream's
// chunks, a complete response's body, usage, and the two shapes of logprobs
// (completions' parallel arrays, chat's list of entries). Pure functions of
// the call's data: no I/O, no engine; the token's text comes from `piece`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_call.h"

namespace th::server {

using WireJson = nlohmann::ordered_json;
/// @brief A token's text as the client sees it (special tokens rendered).
using PieceOf = std::function<std::string(int32_t token)>;

/// @brief "text_completion", "chat.completion(.chunk)", "generation(.chunk)".
std::string_view object_name(ApiEndpoint endpoint, bool chunk);
/// @brief "cmpl-", "chatcmpl-", "gen-": the response id is this + the request id.
std::string_view id_prefix(ApiEndpoint endpoint);

/// @brief A stream chunk with no choices yet (id, object, created, model; usage null
/// when the client asked for usage).
WireJson chunk_header(const Call& c, std::string_view model);
/// @brief prompt, completion and total tokens, and the prompt tokens served from the
/// prefix cache (per prompt: the best of its choices, at most the prompt's length).
WireJson usage_json(const Call& c);

/// @brief Completions' logprobs of events [from, to): tokens, token_logprobs,
/// top_logprobs (null entries unless `with_top`), text_offset counted from `text_base`.
WireJson completion_logprobs(const std::vector<TokenEvent>& events, size_t from, size_t to, size_t text_base,
                             bool with_top, const PieceOf& piece);
/// @brief Chat's logprobs of events [from, to): {"content": [{token, logprob, bytes, top_logprobs}]}.
WireJson chat_logprobs(const std::vector<TokenEvent>& events, size_t from, size_t to, const PieceOf& piece);

/// @brief The chunk a stream starts with, when it has one: chat's role, or the echoed
/// prompt. nullopt for other streams and for continuations.
std::optional<WireJson> opening_chunk(const Call& c, std::string_view model);
/// @brief The next SSE event (its data) for `ch`: what it has that was not sent, its
/// finish_reason once its text is done, an error object when it failed; nullopt when
/// there is nothing to send. Advances ch's sent_* counters and final_sent.
std::optional<std::string> next_event(const Call& c, Choice& ch, std::string_view model, const PieceOf& piece);
/// @brief The body of a complete (non-streamed) response.
WireJson response_body(const Call& c, std::string_view model, const PieceOf& piece);

}  // namespace th::server
