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
//
// It is the reader's side of the cell's native `continuation` field
// (docs/CONVENTIONS.md, Cluster): the request gets a seed (when it has none)
// and asks for token ids, so each choice's first chunk carries its prompt's
// ids and every chunk its generated ids; the resumed request sends them back
// with the bytes of text the reader has, and the sampler's draw keyed by
// (seed, position) makes the rest token-identical. Ids the caller did not
// ask for are removed; `id` and `created` stay the first chunk's.
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

struct StreamRequest {
  std::string body;        // what the first endpoint gets
  bool movable = false;    // a JSON object with stream true, n 1, one prompt, no echo, no continuation
  bool wants_ids = false;  // the caller asked for token ids itself
};

/// @brief The request as sent first. Movable (on /v1/completions and
/// /v1/chat/completions only): `seed_if_none` (31 bits) becomes its seed when
/// it has none, and return_token_ids is set. Anything else (another path, a
/// body that is not a JSON object, n > 1) goes as it is and is never resumed.
StreamRequest prepare_stream_request(std::string_view path, std::string_view body, uint64_t seed_if_none);

/// @brief One SSE payload from an endpoint: updates `p` and returns what to
/// give the caller, or nullopt for nothing (a role chunk sent again after a
/// resume). Non-movable requests' payloads pass unchanged.
std::optional<std::string> rewrite_event(std::string_view payload, const StreamRequest& q, StreamProgress& p);

/// @brief True when the stream can go on through another endpoint.
bool can_resume(const StreamRequest& q, const StreamProgress& p);

/// @brief The body for the next endpoint: the first one, plus (once the
/// prompt's ids are known) the continuation of what the caller has.
std::string resume_body(const StreamRequest& q, const StreamProgress& p);

}  // namespace th::client
