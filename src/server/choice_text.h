// A choice's text from its generated tokens: each token detokenized, through
// the tenant's output filter (PII mask, or the prompt's pseudonyms restored),
// then the stop strings (which hold back what could start one); the engine's
// final event ends it with a finish reason. A continuation (ApiContinuation)
// replays the tokens another cell generated through the same steps.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "server/api_call.h"

namespace th::server {

/// @brief Generated text through the tenant's PII policy; `last` ends it (flushes).
std::string output_filter(Choice& ch, const std::string& piece, bool last);
/// @brief One generated token into ch.token_ids and ch.text.
void append_token(Choice& ch, int32_t id);
/// @brief The end of generation: whatever the detokenizer, the filter and the stop strings hold.
void end_text(Choice& ch);
/// @brief The engine's event `e` into `ch` (its logprobs kept when `keep_logprobs`). A stop
/// string ends the text and cancels the stream (its final event comes later). On the final
/// event: the text is ended, finish_reason set, and the outcome (for the metrics) returned;
/// nullopt for any other event.
std::optional<FinishReason> take_event(Choice& ch, TokenEvent e, bool keep_logprobs);
/// @brief The continuation's tokens through `ch` as if generated here; `g` (the engine
/// request) becomes prompt + those tokens with what is left of max_tokens. True when the
/// choice already ended within them (a stop string, or max_tokens reached): nothing to submit.
bool replay_continuation(const ApiContinuation& k, Choice& ch, GenerateRequest& g);

}  // namespace th::server
