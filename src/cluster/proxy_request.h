// What the router reads and changes in a request, and in the stream a cell
// sends back: pure functions over bytes (no sockets, no clock), so they are
// unit-tested and fuzzed (tests/fuzz/proxy_request_fuzz.cpp).
//
//   Result<ProxyRequest> q = inspect_request(ProxyEndpoint::kCompletions, body, seed);
//   ... for each SSE payload a cell sends:
//   std::optional<std::string> out = rewrite_chunk(payload, *q, snapshot);
//   ... the cell failed mid-stream:
//   std::string again = resume_body(*q, snapshot);   // to another cell
//
// The router is lenient: it reads only what routing needs, and a field of the
// wrong type is left for the cell to refuse with its own 400 (which names the
// field). Only a body that is not a JSON object (or nests deeper than 64, the
// cell's own limit: bounded_json.h) is the router's 400.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "client/stream_resume.h"
#include "cluster/routing_policy.h"

namespace th::cluster {

enum class ProxyEndpoint : uint8_t { kCompletions, kChat, kGenerate };

/// @brief "completions", "chat", "generate" (the metrics' label).
std::string_view endpoint_label(ProxyEndpoint e);

struct ProxyRequest {
  ProxyEndpoint endpoint = ProxyEndpoint::kCompletions;
  nlohmann::ordered_json body;  // as sent, plus the router's seed (and return_token_ids when movable)
  bool stream = false;
  // Streamed, no echo, and a continuation (if any) the router can read: resumable on another
  // cell, the whole request before its first byte, each choice on its own after it.
  bool movable = false;
  int64_t n = 1;           // choices per prompt
  size_t prompts = 1;      // prompts (a completions request may have several)
  bool include_usage = false;  // stream_options.include_usage: the stream ends with a usage chunk
  // A request that is itself a well-formed continuation (a client resuming a stream through
  // this router, failover_client.h): what it carries starts the snapshot, so it moves again.
  std::vector<int32_t> continued_prompt_ids, continued_ids;
  int64_t continued_text_bytes = 0;
  bool wants_ids = false;  // the client asked for token ids (or it is /v1/generate)
  RouteRequest route;      // prefix block hashes, priority, cost
};

/// @brief Reads a request body for the router. `seed_if_none` becomes the
/// request's seed when it has none (so every cell draws the same tokens).
/// An error only when the body is not a JSON object.
Result<ProxyRequest> inspect_request(ProxyEndpoint endpoint, std::string_view body, uint64_t seed_if_none);

/// @brief What the router knows of a stream, enough to resume each choice elsewhere:
/// client::StreamProgress (the failover client's reading, the one implementation), and
/// whether the last cell sent what no cell sends.
struct StreamSnapshot : client::StreamProgress {
  std::string invalid;  // not empty: the cell sent a chunk that is not a JSON object
                        // (or too deep or big to read): the cell failed, the chunk is dropped
};

/// @brief One SSE payload from a cell: updates `snap` and returns what to send
/// the client, or nullopt for nothing ("[DONE]", which the router sends itself
/// at the end; a repeated role chunk; a payload that is not a JSON object within
/// kCellAnswerLimits, which also sets snap.invalid: the cell failed). Token ids
/// the client did not ask for are removed; `id` and `created` stay the first
/// chunk's across cells.
/// `moved_choice` >= 0: the chunk comes from that choice's own continuation (a request of
/// one choice, choice_resume_body): its index 0 becomes `moved_choice`, and its usage chunk is
/// dropped (the router makes the stream's own, usage_chunk).
std::optional<std::string> rewrite_chunk(std::string_view payload, const ProxyRequest& request, StreamSnapshot& snap,
                                         int64_t moved_choice = -1);

/// @brief OK when a cell's whole answer (a non-streamed one, or a stream's error
/// body) may go to the client: a final status (200-599) and a JSON body within
/// kCellAnswerLimits. Otherwise the cell failed: its answer is not passed on.
Status check_cell_answer(int status, std::string_view body);

/// @brief The snapshot a request's stream starts from: empty, or what its continuation carries.
StreamSnapshot start_snapshot(const ProxyRequest& request);

/// @brief True when a stream with this snapshot can continue on another cell (each of its
/// unfinished choices, once its first byte went out).
bool resumable(const ProxyRequest& request, const StreamSnapshot& snap);

/// @brief The choices a request streams: n per prompt.
int64_t choice_count(const ProxyRequest& request);

/// @brief The body that resumes choice `index` alone (after the stream's first byte, when its
/// cell failed): client::choice_body, the failover client's too: n 1, the choice's own prompt
/// and seed (the request's plus the choice's place among its prompt's n, as the cell draws
/// them), and its continuation. When the choice has no prompt ids yet, the continuation is
/// left out (the choice starts over).
std::string choice_resume_body(const ProxyRequest& request, const StreamSnapshot& snap, int64_t index);

/// @brief The stream's usage chunk made from the snapshot (client::usage_chunk: prompt tokens
/// once per prompt, every choice's generated tokens), for a stream whose cells did not send it (it moved per
/// choice, or its cell failed after the last finish); nullopt when the client did not ask
/// for usage or it went out already.
std::optional<std::string> usage_chunk(const ProxyRequest& request, const StreamSnapshot& snap);

/// @brief The body to send the next cell: the request as it was, and once the
/// prompt's ids are known, the `continuation` (prompt ids, generated ids, text
/// bytes the client has) that resumes it exactly.
std::string resume_body(const ProxyRequest& request, const StreamSnapshot& snap);

}  // namespace th::cluster
