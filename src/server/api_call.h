// One HTTP request for generation (a Call) and its choices, as the responder
// thread holds them from intake to the last byte. Plain data: the service
// (api_service.cpp) drives them, openai_format renders them, admission admits
// them and call_record logs them.
#pragma once

#include <chrono>
#include <deque>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "http/response_writer.h"
#include "pii/pii_redactor.h"
#include "server/api_keys.h"
#include "server/api_request.h"
#include "server/stop_strings.h"
#include "server/tool_call_parser.h"
#include "tokenizer/tokenizer.h"

namespace th::server {

using ApiClock = std::chrono::steady_clock;

// One choice: one engine request and the text made of its tokens.
struct Choice {
  int index = 0;         // OpenAI's: prompt_index * n + i
  size_t prompt_index = 0;
  std::optional<RequestStream> stream;
  std::optional<Detokenizer> detok;
  std::optional<StopStringFilter> stop;
  std::unique_ptr<pii::StreamingRedactor> pii_mask;      // the tenant's policy: mask personal data in the output
  std::unique_ptr<pii::StreamingRestorer> pii_restore;   // ... or restore the prompt's pseudonyms in it
  std::string text;                 // everything released so far
  std::vector<int32_t> token_ids;   // every generated token
  std::vector<TokenEvent> logprob_events;  // with logprobs: every generated token's event (no text)
  size_t sent_text = 0, sent_tokens = 0, sent_logprobs = 0;  // how much a stream has sent
  bool text_done = false;     // the text is complete (a stop string may end it before the engine stops)
  bool done = false;          // ... and the engine's final event has arrived
  bool final_sent = false;    // a stream has sent its finish_reason (or error)
  bool prompt_ids_sent = false;  // a stream with token ids has sent the prompt's (in its first chunk)
  std::string finish_reason;  // stop | length | cancelled | error
  std::string error;
  RequestMetrics metrics;
  // A stream of a chat with tools: the released text parsed for calls as it comes
  // (tool_call_parser.h), the deltas waiting to go out (one per chunk), calls found so far.
  std::unique_ptr<ToolCallParser> tool_parser;
  std::deque<nlohmann::ordered_json> tool_deltas;
  size_t tool_calls = 0;
  bool tool_parser_done = false;
};

// One HTTP request for generation, from parse to its last byte.
struct Call {
  uint64_t id = 0;
  ApiRequest req;
  std::string request_id, path, client;  // client: the peer's "address:port" (empty: unknown)
  http::ResponseWriter writer;
  std::string tenant;
  ApiClock::time_point received;
  int64_t created = 0;  // unix seconds
  std::string response_id;
  uint64_t seed = 0;
  std::vector<std::vector<int32_t>> prompt_ids;
  std::vector<std::string> prompt_texts;  // for echo
  std::vector<Choice> choices;
  std::optional<ToolCallFormat> tool_format;  // a chat with active tools: the output's format
  bool submitted = false;   // every choice is in the engine
  bool streaming = false;   // the SSE stream has started
  bool client_gone = false;
  const ApiKey* key = nullptr;  // with --api-keys
  std::unique_ptr<pii::Redactor> redactor;  // with a key whose pii policy is mask or pseudonymize
  int64_t token_estimate = 0;   // what the rate limiter was charged up front
  int status = 0;               // the status sent (0: nothing yet)
  int64_t bytes_out = 0;        // body bytes handed to the client (JSON body, or SSE events)
  bool logged = false;          // its access-log line is written (a refusal logs at once)
  bool holds_slot = false;      // counted in its tenant's in-flight calls (max_concurrency)
};

}  // namespace th::server
