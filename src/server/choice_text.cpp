#include "server/choice_text.h"

#include <algorithm>

namespace th::server {

// A continuation (ApiContinuation): the tokens the first cell generated go through this
// choice's detokenizer, output filter and stop strings as if generated here, and the engine
// request becomes prompt + those tokens with what is left of max_tokens. True when the choice
// already ended within them (a stop string, or max_tokens reached): nothing to submit.
bool replay_continuation(const ApiContinuation& k, Choice& ch, GenerateRequest& g) {
  for (int32_t id : k.token_ids) {
    append_token(ch, id);
    if (ch.stop->stopped()) break;
  }
  ch.sent_tokens = ch.token_ids.size();
  ch.prompt_ids_sent = true;  // the router has them
  g.prompt.insert(g.prompt.end(), k.token_ids.begin(), k.token_ids.end());
  const int64_t generated = static_cast<int64_t>(k.token_ids.size());
  const bool stopped = ch.stop->stopped();
  const bool full = g.max_tokens >= 0 && generated >= g.max_tokens;
  if (!stopped && !full) {
    if (g.max_tokens >= 0) g.max_tokens -= generated;
    ch.sent_text = std::min<size_t>(static_cast<size_t>(k.text_bytes), ch.text.size());
    return false;
  }
  if (!stopped) end_text(ch);
  ch.sent_text = std::min<size_t>(static_cast<size_t>(k.text_bytes), ch.text.size());
  ch.done = ch.text_done = true;
  ch.finish_reason = stopped ? "stop" : "length";
  return true;
}

// One generated token into the choice's text: detokenized, through the output filter, then
// the stop strings (which hold back what could start one).
void append_token(Choice& ch, int32_t id) {
  ch.token_ids.push_back(id);
  ch.text += ch.stop->push(output_filter(ch, ch.detok->push(id), false));
}

// The end of generation: whatever the detokenizer, the output filter and the stop strings
// still hold.
void end_text(Choice& ch) {
  ch.text += ch.stop->push(output_filter(ch, ch.detok->flush(), true));
  ch.text += ch.stop->flush();
}

// Generated text through the tenant's PII policy (mask, or restore pseudonyms); `last` ends it.
std::string output_filter(Choice& ch, const std::string& piece, bool last) {
  if (ch.pii_mask) return last ? ch.pii_mask->push(piece) + ch.pii_mask->flush() : ch.pii_mask->push(piece);
  if (ch.pii_restore) return last ? ch.pii_restore->push(piece) + ch.pii_restore->flush() : ch.pii_restore->push(piece);
  return piece;
}

std::optional<FinishReason> take_event(Choice& ch, TokenEvent e, bool keep_logprobs) {
  if (ch.done) return std::nullopt;
  if (e.token >= 0 && !ch.text_done) {
    append_token(ch, e.token);
    if (keep_logprobs) {
      TokenEvent lp = e;
      lp.finish.reset();
      ch.logprob_events.push_back(std::move(lp));
    }
    if (ch.stop->stopped()) {
      // A stop string: the text ends here; the engine stops at its next step and its final
      // event (Cancelled) completes the choice with its metrics.
      ch.text_done = true;
      ch.finish_reason = "stop";
      ch.stream->cancel();
    }
  }
  if (!e.finish) return std::nullopt;
  FinishReason outcome = *e.finish;
  if (!ch.text_done) {
    end_text(ch);
    ch.text_done = true;
    switch (outcome) {
      case FinishReason::Stop: ch.finish_reason = "stop"; break;
      case FinishReason::Length:
      case FinishReason::Deadline: ch.finish_reason = "length"; break;
      case FinishReason::Cancelled: ch.finish_reason = "cancelled"; break;
      case FinishReason::Error:
        ch.error = e.error.empty() ? "the engine failed this request" : e.error;
        ch.finish_reason = "error";
        break;
    }
  } else if (outcome == FinishReason::Cancelled && ch.finish_reason == "stop") {
    outcome = FinishReason::Stop;  // we cancelled it for a stop string: it ended on a stop
  }
  return outcome;
}

}  // namespace th::server
