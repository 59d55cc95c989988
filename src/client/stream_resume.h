// What a streamed completion's reader keeps so that, when the server sending
// it fails mid-stream, another server goes on from where the reader is: pure
// functions over bytes (no sockets, no clock), unit-tested. The one
// implementation for both readers of a stream: the failover client
// (failover_client.h, between endpoints) and the router (cluster/
// proxy_request.h, between cells; cluster/ may include client/).
//
//   StreamRequest q = prepare_stream_request("/v1/completions", body, seed);
//   ... for each SSE payload an endpoint sends:
//   std::optional<std::string> out = rewrite_event(payload, q, progress);  // to the caller
//   ... the endpoint failed mid-stream:
//   if (can_resume(q, progress)) next_body = resume_body(q, progress);
//   ... or, with several choices (n > 1, several prompts), each unfinished one alone:
//   next_body = choice_resume_body(q, progress, i);  // its events: rewrite_event(..., i)
//
// It is the reader's side of the cell's native `continuation` field
// (docs/CONVENTIONS.md, Cluster): the request gets a seed (when it has none)
// and asks for token ids, so each choice's first chunk carries its prompt's
// ids and every chunk its generated ids; the resumed request sends them back
// with the bytes of text the reader has, and the sampler's draw keyed by
// (seed, position) makes the rest token-identical. Ids the caller did not
// ask for are removed; `id` and `created` stay the first chunk's. A stream
// of several choices moves choice by choice once its first byte went out
// (the server's continuation is of one choice): choice i becomes a request
// of n 1 with its prompt (i / n) and seed (+ i % n, as the server draws the
// k-th choice of a prompt with seed + k), and its chunks are re-indexed to i;
// the usage chunk is then the reader's, made from what it has (usage_chunk).
// What never moves: another path, a body that is not a JSON object, no
// stream, echo (the server refuses it in a continuation), a continuation of
// the caller's own, and a stream after an error event or an unreadable chunk.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace th::client {

/// @brief What the reader has of one choice of a stream (its `index`).
struct ChoiceProgress {
  std::vector<int32_t> prompt_ids;  // from the choice's first chunk
  std::vector<int32_t> generated;   // every token id the reader has
  int64_t text_bytes = 0;           // bytes of generated text the reader has
  bool role_sent = false;           // chat: the assistant role chunk went out
  bool finished = false;            // a finish_reason went out
};

/// @brief What the reader has of a stream: enough to resume it elsewhere.
struct StreamProgress {
  std::map<int64_t, ChoiceProgress> choices;  // by the choice's index (0 when a chunk has none)
  int64_t events = 0;                         // events passed on
  bool done = false;                          // [DONE] went out
  bool error_event = false;                   // the server sent an error event: the stream ends there
  bool unreadable = false;                    // a chunk that is not a readable JSON object, or ids that are not ids
  bool usage_sent = false;                    // a chunk with a usage object went out
  nlohmann::ordered_json id, created;         // the first chunk's, kept for every later chunk
  nlohmann::ordered_json object, model;       // ... and its object and model (a chunk the reader makes itself)

  /// @brief The choice at `index`, or an empty one.
  const ChoiceProgress& choice(int64_t index = 0) const;
  /// @brief True when choices 0..count-1 all have their finish reason.
  bool all_finished(size_t count) const;
};

/// @brief Appends the token ids of `v` (an array of integers in 0..INT32_MAX) to `out`;
/// false when `v` is anything else.
bool append_token_ids(const nlohmann::ordered_json& v, std::vector<int32_t>& out);

/// @brief Reads one chunk (a JSON object) into `p` and changes it to what goes on: ids
/// removed unless `keep_ids`, `id` and `created` the first chunk's. False when the chunk
/// must not go on: a choice's role chunk sent again by a server that started it over.
bool track_chunk(nlohmann::ordered_json& chunk, bool keep_ids, StreamProgress& p);

/// @brief `body` with the `continuation` (prompt ids, generated ids, text bytes) that
/// resumes choice `c` exactly.
void set_continuation(nlohmann::ordered_json& body, const ChoiceProgress& c);

/// @brief Choices per prompt: the body's `n` when it is an integer (clamped to 1..1024), else 1
/// (the server refuses a bad one before any byte).
int64_t choices_per_prompt(const nlohmann::ordered_json& body);

/// @brief Prompts in a body: a completions `prompt` that is a list of strings or of id lists
/// holds several; a list of ids is one prompt, and chat has one.
size_t prompt_count(const nlohmann::ordered_json& body, bool chat);

/// @brief A chunk of choice `index`'s own stream (a request of n 1: choice_body): its
/// choices' index becomes `index`. False for its usage chunk, which must not go on (the
/// reader makes the stream's own: usage_chunk).
bool move_chunk(nlohmann::ordered_json& chunk, int64_t index);

/// @brief `body` (a request of `n` choices per prompt over `prompts` prompts, with its seed)
/// changed to resume choice `index` alone: n 1 (best_of, which must equal n, dropped), the
/// choice's prompt, seed + index % n, and the choice's continuation once `p` has its prompt
/// ids (without them the choice starts over).
nlohmann::ordered_json choice_body(nlohmann::ordered_json body, int64_t n, size_t prompts, const StreamProgress& p,
                                   int64_t index);

/// @brief The stream's usage chunk made from `p`: prompt tokens once per prompt (its
/// choices' first chunks all carry them), every choice's generated tokens, and the first
/// chunk's id, object, created and model.
nlohmann::ordered_json usage_chunk(int64_t n, size_t prompts, const StreamProgress& p);

struct StreamRequest {
  std::string body;            // what the first endpoint gets
  bool movable = false;        // a JSON object with stream true, no echo, no continuation
  bool wants_ids = false;      // the caller asked for token ids itself
  int64_t n = 1;               // choices per prompt (choices_per_prompt)
  size_t prompts = 1;          // prompts (prompt_count)
  bool include_usage = false;  // stream_options.include_usage: the stream ends with a usage chunk

  /// @brief The choices the stream carries: n per prompt.
  int64_t choices() const { return n * static_cast<int64_t>(prompts); }
};

/// @brief The request as sent first. Movable (on /v1/completions and
/// /v1/chat/completions only): `seed_if_none` (31 bits) becomes its seed when
/// it has none, and return_token_ids is set. Anything else (another path, a
/// body that is not a JSON object, no stream, echo, a continuation) goes as it
/// is and is never resumed.
StreamRequest prepare_stream_request(std::string_view path, std::string_view body, uint64_t seed_if_none);

/// @brief One SSE payload from an endpoint: updates `p` and returns what to
/// give the caller, or nullopt for nothing (a role chunk sent again after a
/// resume). Non-movable requests' payloads pass unchanged. `moved_choice` >= 0:
/// the payload comes from that choice's own stream (choice_resume_body): it is
/// re-indexed to it, and its usage chunk is dropped (move_chunk).
std::optional<std::string> rewrite_event(std::string_view payload, const StreamRequest& q, StreamProgress& p,
                                         int64_t moved_choice = -1);

/// @brief True when the stream can go on through another endpoint: movable, no error
/// event or unreadable chunk, not done, and every unfinished choice either has its
/// prompt's ids or nothing yet (it starts over).
bool can_resume(const StreamRequest& q, const StreamProgress& p);

/// @brief The body for the next endpoint: the first one, plus (once the
/// prompt's ids are known) the continuation of what the caller has. For a
/// stream of one choice; with several, choice_resume_body per choice.
std::string resume_body(const StreamRequest& q, const StreamProgress& p);

/// @brief The body that resumes choice `index` alone (choice_body); resume_body when the
/// stream has one choice.
std::string choice_resume_body(const StreamRequest& q, const StreamProgress& p, int64_t index);

/// @brief The usage chunk to send before `[DONE]` when the endpoints did not (the stream
/// moved per choice, or its endpoint failed after the last finish): nullopt when the
/// caller did not ask for usage or it went out already.
std::optional<std::string> final_usage_chunk(const StreamRequest& q, const StreamProgress& p);

}  // namespace th::client
