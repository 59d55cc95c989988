// What the failover client (failover_client.h) reads and changes in a streamed
// completion so that, when its endpoint fails mid-stream, another endpoint
// goes on from where the caller is: pure functions over bytes (no sockets, no
// clock), unit-tested.
//
//   StreamRequest q = prepare_stream_request("/v1/completions", body, seed);
//   ... for each SSE payload an endpoint sends:
//   std::optional<std::string> out = rewrite_event(payload, q, progress);  // to the caller
//   ... the endpoint failed mid-stream:
//   if (can_resume(q, progress)) next_body = resume_body(q, progress);
//
// It is the client's side of the cell's native `continuation` field
// (docs/CONVENTIONS.md, Cluster), the same one the router uses between cells
// (cluster/proxy_request.h, which client/ may not include): the request gets
// a seed (when it has none) and asks for token ids, so the first chunk
// carries the prompt's ids and every chunk its generated ids; the resumed
// request sends them back with the bytes of text the caller has, and the
// sampler's draw keyed by (seed, position) makes the rest token-identical.
// Ids the caller did not ask for are removed; `id` and `created` stay the
// first chunk's. A router in front of cells passes the continuation to one
// of them, and moves it on if that cell fails (cluster/proxy_request.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace th::client {

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

/// @brief What the caller has of a stream: enough to resume it elsewhere.
struct StreamProgress {
  std::vector<int32_t> prompt_ids;  // from the first chunk
  std::vector<int32_t> generated;   // every token id the caller has
  int64_t text_bytes = 0;           // bytes of generated text the caller has
  int64_t events = 0;               // events passed to the caller
  bool role_sent = false;           // chat: the assistant role chunk went out
  bool finished = false;            // a finish_reason went out
  bool done = false;                // [DONE] went out
  bool error_event = false;         // the server sent an error event: the stream ends there
  bool unreadable = false;          // a chunk that is not a readable JSON object, or ids that are not ids
  std::string id, created;          // the first chunk's, as JSON text
};

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
