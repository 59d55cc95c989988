#include "server/api_service.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "server/access_log.h"
#include "server/api_keys.h"
#include "audit/audit_log.h"
#include "http/http_server.h"
#include "pii/pii_recognizers.h"
#include "pii/pii_redactor.h"
#include "server/rate_limiter.h"
#include "server/serving_metrics.h"
#include "server/stop_strings.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace th::server {

namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

http::HttpResponse ordered_json_response(int status, const json& body) {
  http::HttpResponse r;
  r.status = status;
  r.set_header("Content-Type", "application/json");
  r.body = http::json_text(body);
  return r;
}

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
};

// One HTTP request for generation, from parse to its last byte.
struct Call {
  uint64_t id = 0;
  ApiRequest req;
  std::string request_id, path;
  http::ResponseWriter writer;
  std::string tenant;
  Clock::time_point received;
  int64_t created = 0;  // unix seconds
  std::string response_id;
  uint64_t seed = 0;
  std::vector<std::vector<int32_t>> prompt_ids;
  std::vector<std::string> prompt_texts;  // for echo
  std::vector<Choice> choices;
  bool submitted = false;   // every choice is in the engine
  bool streaming = false;   // the SSE stream has started
  bool client_gone = false;
  const ApiKey* key = nullptr;  // with --api-keys
  std::unique_ptr<pii::Redactor> redactor;  // with a key whose pii policy is mask or pseudonymize
  int64_t token_estimate = 0;   // what the rate limiter was charged up front
  int status = 0;               // the status sent (0: nothing yet)
  bool logged = false;          // its access-log line is written (a refusal logs at once)
  bool holds_slot = false;      // counted in its tenant's in-flight calls (max_concurrency)
};

// Who asked, for the logs of a request refused before it became a call.
struct Requester {
  std::string request_id, method, path, tenant;
  const ApiKey* key = nullptr;
};

// What the event loops, the engine thread and the responder share. Held by shared_ptr in
// every callback, so a late callback never touches a dead service.
struct Mailbox {
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Call>> incoming;
  std::vector<uint64_t> woken;  // calls with new events
  std::vector<uint64_t> gone;   // calls whose client disconnected
  bool stopping = false;

  void wake(uint64_t id, bool client_gone) {
    {
      std::lock_guard<std::mutex> l(m);
      (client_gone ? gone : woken).push_back(id);
    }
    cv.notify_one();
  }
};

std::string_view object_name(ApiEndpoint ep, bool chunk) {
  switch (ep) {
    case ApiEndpoint::Completions: return "text_completion";
    case ApiEndpoint::ChatCompletions: return chunk ? "chat.completion.chunk" : "chat.completion";
    case ApiEndpoint::Generate: return chunk ? "generation.chunk" : "generation";
  }
  return "?";
}

std::string_view id_prefix(ApiEndpoint ep) {
  switch (ep) {
    case ApiEndpoint::Completions: return "cmpl-";
    case ApiEndpoint::ChatCompletions: return "chatcmpl-";
    case ApiEndpoint::Generate: return "gen-";
  }
  return "";
}

std::string strip_request_prefix(const std::string& message) {
  constexpr std::string_view kPrefix = "request: ";
  return message.rfind(kPrefix, 0) == 0 ? message.substr(kPrefix.size()) : message;
}

}  // namespace

struct ApiService::Impl {
  explicit Impl(ApiServiceOptions o) : options(std::move(o)), mailbox(std::make_shared<Mailbox>()), rng(std::random_device{}()) {}

  ApiServiceOptions options;
  std::shared_ptr<Mailbox> mailbox;
  enum State : int { kLoading, kReady, kDraining, kStopped };
  std::atomic<int> state{kLoading};
  std::atomic<uint64_t> next_call{1};
  std::atomic<int64_t> in_flight{0};   // calls not yet answered
  std::atomic<int64_t> pending{0};     // choices in the engine
  std::atomic<Engine*> engine{nullptr};  // set once by attach(); read from any thread
  const Tokenizer* tok = nullptr;
  const ChatTemplate* chat = nullptr;
  std::thread responder;
  int64_t started_unix = 0;

  // Responder thread only.
  std::unordered_map<uint64_t, std::shared_ptr<Call>> calls;
  std::unordered_map<std::string, int64_t> tenant_in_flight;  // calls of tenants with a concurrency cap
  std::mt19937_64 rng;

  // --- event-loop side
  void handle_generation(ApiEndpoint ep, const http::HttpRequest& r, http::ResponseWriter w);
  void handle_models(const http::HttpRequest& r, http::ResponseWriter w);
  bool check_ready(const http::HttpRequest& r, http::ResponseWriter& w);

  // --- responder side
  void run();
  void start_call(const std::shared_ptr<Call>& call);
  Status tokenize(Call& c, std::string* param);
  void pump(Call& c);
  static std::string output_filter(Choice& ch, const std::string& piece, bool last);
  static void append_token(Choice& ch, int32_t id);
  static void end_text(Choice& ch);
  void emit(Call& c, Choice& ch);
  void take_event(Call& c, Choice& ch, TokenEvent e);
  bool replay(Call& c, Choice& ch, GenerateRequest& g);
  void finish_choice(Choice& ch, FinishReason outcome);
  void reject(http::ResponseWriter& w, int status, http::ApiError e, std::string_view reason, const Requester& who,
              std::chrono::seconds retry_after = std::chrono::seconds(0));
  const ApiKey* authenticate(const http::HttpRequest& r, http::ResponseWriter& w);
  void account(Call& c);
  void audit_append(const audit::AuditEntry& e);
  void refuse(Call& c, int status, http::ApiError e, std::string_view reason,
              std::chrono::seconds retry_after = std::chrono::seconds(0));
  bool complete(Call& c) const;
  void respond(Call& c);
  void fail(Call& c, int status, http::ApiError e);
  void drop(Call& c);

  json usage(const Call& c) const;
  json chunk(const Call& c) const;
  json load();
  bool admin_allowed(const http::HttpRequest& r) const;
  std::mutex rate_mu;  // the tokens/s window of load()
  Clock::time_point rate_at{};
  int64_t rate_tokens = 0;
  double tokens_per_second = 0;
  json completion_logprobs(const Call& c, const Choice& ch, size_t from, size_t to, size_t text_base) const;
  json chat_logprobs(const Choice& ch, size_t from, size_t to) const;
};

// ---------------------------------------------------------------------------
// Event loops: parse, check, hand over.

bool ApiService::Impl::check_ready(const http::HttpRequest& r, http::ResponseWriter& w) {
  const int s = state.load(std::memory_order_acquire);
  if (s == kReady) return true;
  reject(w, 503,
         http::ApiError{s == kLoading ? "the model is still loading" : "the server is shutting down", "", std::nullopt,
                  std::string(s == kLoading ? "loading" : "draining")},
         "not_ready", Requester{r.id, r.method, r.path, ""});
  return false;
}

void ApiService::Impl::handle_generation(ApiEndpoint ep, const http::HttpRequest& r, http::ResponseWriter w) {
  if (!check_ready(r, w)) return;
  const ApiKey* key = nullptr;
  if (options.keys && !(key = authenticate(r, w))) return;
  const Requester who{r.id, r.method, r.path, key ? key->tenant : "", key};
  ApiParseResult parsed = parse_api_request(ep, r.body, options.limits);
  if (http::ApiError* e = std::get_if<http::ApiError>(&parsed)) {
    reject(w, 400, std::move(*e), "invalid", who);
    return;
  }
  auto call = std::make_shared<Call>();
  call->req = std::move(std::get<ApiRequest>(parsed));
  if (key) {
    if (std::optional<http::ApiError> e = check_priority(*key, call->req.priority)) {
      reject(w, 403, std::move(*e), "invalid", who);
      return;
    }
    call->key = key;
    call->tenant = key->tenant;
  }
  if (!call->req.model.empty() && call->req.model != options.model_name) {
    reject(w, 404,
           http::ApiError{cat("The model `", call->req.model, "` does not exist (this server serves `", options.model_name, "`)"),
                    "", std::string("model"), std::string("model_not_found")},
           "invalid", who);
    return;
  }
  call->id = next_call.fetch_add(1);
  call->request_id = r.id;
  call->path = r.path;
  call->writer = w;
  call->received = Clock::now();
  call->created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  call->response_id = cat(id_prefix(ep), r.id);
  in_flight.fetch_add(1);
  std::shared_ptr<Mailbox> mb = mailbox;
  const uint64_t id = call->id;
  w.on_close([mb, id] { mb->wake(id, /*client_gone=*/true); });
  {
    std::lock_guard<std::mutex> l(mailbox->m);
    mailbox->incoming.push_back(std::move(call));
  }
  mailbox->cv.notify_one();
}

void ApiService::Impl::handle_models(const http::HttpRequest& r, http::ResponseWriter w) {
  if (options.keys && !authenticate(r, w)) return;
  json model = {{"id", options.model_name},
                {"object", "model"},
                {"created", started_unix},
                {"owned_by", "tokenhive"}};
  if (const Engine* e = engine.load(std::memory_order_acquire)) model["max_model_len"] = e->max_model_len();
  if (r.path == "/v1/models") {
    w.send(ordered_json_response(200, json{{"object", "list"}, {"data", json::array({model})}}));
    return;
  }
  const std::string_view name = std::string_view(r.path).substr(std::string_view("/v1/models/").size());
  if (name != options.model_name) {
    w.send(http::error_response(404, http::ApiError{cat("The model `", name, "` does not exist"), "", std::string("model"),
                                        std::string("model_not_found")}));
    return;
  }
  w.send(ordered_json_response(200, model));
}

// ---------------------------------------------------------------------------
// The responder thread.

void ApiService::Impl::run() {
  for (;;) {
    std::deque<std::shared_ptr<Call>> incoming;
    std::vector<uint64_t> woken, gone;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> l(mailbox->m);
      mailbox->cv.wait(l, [&] {
        return mailbox->stopping || !mailbox->incoming.empty() || !mailbox->woken.empty() || !mailbox->gone.empty();
      });
      incoming.swap(mailbox->incoming);
      woken.swap(mailbox->woken);
      gone.swap(mailbox->gone);
      stopping = mailbox->stopping;
    }
    for (uint64_t id : gone) {
      auto it = calls.find(id);
      if (it != calls.end()) it->second->client_gone = true;
    }
    for (std::shared_ptr<Call>& c : incoming) {
      calls.emplace(c->id, c);
      start_call(c);
      woken.push_back(c->id);
    }
    for (uint64_t id : gone) woken.push_back(id);
    std::sort(woken.begin(), woken.end());
    woken.erase(std::unique(woken.begin(), woken.end()), woken.end());
    for (uint64_t id : woken) {
      auto it = calls.find(id);
      if (it == calls.end()) continue;
      Call& c = *it->second;
      if (c.client_gone) {
        drop(c);
      } else {
        pump(c);
        if (!complete(c)) continue;
        respond(c);
      }
      account(c);
      calls.erase(it);
      in_flight.fetch_sub(1);
    }
    if (stopping) {
      for (auto& [id, c] : calls) {
        drop(*c);
        account(*c);
        in_flight.fetch_sub(1);
      }
      calls.clear();
      return;
    }
  }
}

Status ApiService::Impl::tokenize(Call& c, std::string* param) {
  const ApiRequest& q = c.req;
  const VocabData& v = tok->vocab();
  if (c.redactor) {
    // The tenant's PII policy: personal data in text never reaches the model (token-id
    // prompts are taken as they are).
    if (q.endpoint == ApiEndpoint::ChatCompletions) {
      for (auto& m : c.req.messages)
        if (m.contains("content") && m["content"].is_string())
          m["content"] = c.redactor->redact(m["content"].get<std::string>());
    } else {
      for (ApiPrompt& p : c.req.prompts)
        if (!p.is_tokens) p.text = c.redactor->redact(p.text);
    }
  }
  if (q.endpoint == ApiEndpoint::ChatCompletions && !q.continuation) {
    *param = "messages";
    const std::string bos = v.bos >= 0 ? tok->token_to_piece(v.bos, true) : "";
    const std::string eos = v.eos >= 0 ? tok->token_to_piece(v.eos, true) : "";
    Result<std::string> text = chat->render_json(q.messages, q.add_generation_prompt, bos, eos);
    if (!text.ok()) return Status::errorf("the chat template failed on these messages: ", text.message());
    std::vector<int32_t> ids = tok->encode(*text, /*add_special=*/false, /*parse_special=*/true);
    if (v.add_bos && v.bos >= 0 && (ids.empty() || ids.front() != v.bos)) ids.insert(ids.begin(), v.bos);
    c.prompt_ids.push_back(std::move(ids));
    c.prompt_texts.push_back(std::move(*text));
    return ok_status();
  }
  *param = "prompt";
  if (q.continuation) {
    // A stream another cell began: its prompt ids as they are (no template, no tokenizer).
    *param = "continuation";
    for (const std::vector<int32_t>* ids : {&q.continuation->prompt_token_ids, &q.continuation->token_ids})
      for (int32_t id : *ids)
        if (id >= tok->n_vocab())
          return Status::errorf("token ", id, " is outside the vocabulary of ", tok->n_vocab(), " tokens");
    c.prompt_ids.push_back(q.continuation->prompt_token_ids);
    c.prompt_texts.push_back(tok->decode(q.continuation->prompt_token_ids));
    return ok_status();
  }
  for (const ApiPrompt& p : q.prompts) {
    if (p.is_tokens) {
      for (int32_t id : p.tokens)
        if (id < 0 || id >= tok->n_vocab())
          return Status::errorf("prompt token ", id, " is outside the vocabulary of ", tok->n_vocab(), " tokens");
      c.prompt_ids.push_back(p.tokens);
      c.prompt_texts.push_back(tok->decode(p.tokens));  // for echo and the audit log's digest
    } else {
      // As llama.cpp's server and vLLM do: BOS when the vocab adds it, special tokens' text parsed.
      c.prompt_ids.push_back(tok->encode(p.text, /*add_special=*/true, /*parse_special=*/true));
      c.prompt_texts.push_back(p.text);
    }
    if (c.prompt_ids.back().empty()) return Status::error("the prompt is empty and this vocabulary has no BOS to start from");
  }
  return ok_status();
}

void ApiService::Impl::start_call(const std::shared_ptr<Call>& cp) {
  Call& c = *cp;
  const ApiRequest& q = c.req;
  if (c.key && c.key->pii != PiiPolicy::Off) {
    pii::RedactPolicy policy;
    policy.mode = c.key->pii == PiiPolicy::Mask ? pii::RedactMode::kMask : pii::RedactMode::kPseudonymize;
    c.redactor = std::make_unique<pii::Redactor>(policy);
  }
  std::string param;
  if (Status s = tokenize(c, &param); !s.ok()) {
    fail(c, 400, http::ApiError{s.message(), "", param, std::nullopt});
    if (options.metrics) options.metrics->record_rejected("invalid");
    return;
  }
  const int64_t n_choices = static_cast<int64_t>(c.prompt_ids.size()) * q.n;
  if (pending.load() + n_choices > options.max_pending) {
    refuse(c, 429,
           http::ApiError{cat("the server is at capacity (", options.max_pending, " requests in flight); retry later"), "",
                    std::nullopt, std::string("queue_full")},
           "queue_full");
    return;
  }
  if (c.key && c.key->max_concurrency > 0) {
    int64_t& busy = tenant_in_flight[c.tenant];
    if (busy >= c.key->max_concurrency) {
      refuse(c, 429,
             http::ApiError{cat("this tenant has ", busy, " requests in flight, its limit; retry when one finishes"), "",
                      std::nullopt, std::string("concurrency_limit_exceeded")},
             "rate_limited");
      return;
    }
    ++busy;
    c.holds_slot = true;
  }
  if (c.key && options.rate_limiter) {
    // Charged up front with the most the request can cost (prompts, and max_tokens per
    // choice; 256 when unbounded), settled with the real count when it ends.
    int64_t estimate = 0;
    for (const std::vector<int32_t>& p : c.prompt_ids) estimate += static_cast<int64_t>(p.size());
    estimate += static_cast<int64_t>(c.prompt_ids.size()) * q.n * (q.max_tokens > 0 ? q.max_tokens : 256);
    RateLimiter::Decision d = options.rate_limiter->admit(*c.key, estimate, Clock::now());
    if (!d.allowed) {
      refuse(c, 429,
             http::ApiError{cat("rate limit reached for this key: ", limit_name(d.limit), " per minute; retry in ",
                          d.retry_after.count(), " s"),
                      "", std::nullopt, std::string("rate_limit_exceeded")},
             "rate_limited", d.retry_after);
      return;
    }
    c.token_estimate = estimate;
  }
  c.seed = q.seed_given ? q.sampling.seed : rng() >> 1;
  std::shared_ptr<Mailbox> mb = mailbox;
  const uint64_t call_id = c.id;
  for (size_t p = 0; p < c.prompt_ids.size(); ++p) {
    for (int32_t i = 0; i < q.n; ++i) {
      Choice ch;
      ch.prompt_index = p;
      ch.index = static_cast<int>(p) * q.n + i;
      ch.detok.emplace(*tok);
      // The prompt goes through the detokenizer first, so the continuation's first piece
      // keeps its leading space (it is dropped only right after BOS).
      for (int32_t id : c.prompt_ids[p]) ch.detok->push(id);
      ch.stop.emplace(q.stop);
      if (c.redactor && c.redactor->policy().mode == pii::RedactMode::kMask) ch.pii_mask = std::make_unique<pii::StreamingRedactor>(*c.redactor);
      if (c.redactor && c.redactor->policy().mode == pii::RedactMode::kPseudonymize)
        ch.pii_restore = std::make_unique<pii::StreamingRestorer>(*c.redactor);
      GenerateRequest g;
      g.prompt = c.prompt_ids[p];
      g.sampling = q.sampling;
      g.sampling.seed = c.seed + static_cast<uint64_t>(i);  // n choices: n different draws
      g.max_tokens = q.max_tokens > 0 ? q.max_tokens : (q.endpoint == ApiEndpoint::Completions ? 16 : -1);
      if (q.continuation && replay(c, ch, g)) {
        c.choices.push_back(std::move(ch));  // it ended within what the first cell generated
        continue;
      }
      g.stop_token_ids = q.stop_token_ids;
      g.ignore_eos = q.ignore_eos;
      g.priority = q.priority;
      g.compute_type = q.compute_type;
      g.tenant = c.tenant;
      g.logprobs = q.logprobs;
      Result<RequestStream> s = engine.load(std::memory_order_acquire)->submit(std::move(g), [mb, call_id] { mb->wake(call_id, false); });
      if (!s.ok()) {
        for (Choice& done : c.choices) {  // cancel what was submitted
          if (!done.stream) continue;
          done.stream.reset();
          pending.fetch_sub(1);
        }
        const bool compute = q.compute_type != ComputeType::Auto && s.message().find("compute type") != std::string::npos;
        fail(c, 400, http::ApiError{strip_request_prefix(s.message()), "", std::string(compute ? "compute_type" : param), std::nullopt});
        if (options.metrics) options.metrics->record_rejected("invalid");
        return;
      }
      pending.fetch_add(1);
      ch.stream.emplace(std::move(*s));
      c.choices.push_back(std::move(ch));
    }
  }
  c.submitted = true;
  if (q.stream) {
    if (!c.writer.start_sse()) {
      c.client_gone = true;
      return;
    }
    c.streaming = true;
    c.status = 200;
    if ((q.endpoint == ApiEndpoint::ChatCompletions || q.echo) && !q.continuation) {
      // OpenAI's first chat chunk carries the role; echo sends the prompt first.
      json j = chunk(c);
      for (const Choice& ch : c.choices) {
        json choice = {{"index", ch.index}};
        if (q.endpoint == ApiEndpoint::ChatCompletions) {
          choice["delta"] = {{"role", "assistant"}, {"content", ""}};
        } else {
          choice["text"] = c.prompt_texts[ch.prompt_index];
        }
        choice["logprobs"] = nullptr;
        choice["finish_reason"] = nullptr;
        j["choices"].push_back(std::move(choice));
      }
      c.writer.send_event(http::json_text(j));
    }
  }
}

// A continuation (ApiContinuation): the tokens the first cell generated go through this
// choice's detokenizer, output filter and stop strings as if generated here, and the engine
// request becomes prompt + those tokens with what is left of max_tokens. True when the choice
// already ended within them (a stop string, or max_tokens reached): nothing to submit.
bool ApiService::Impl::replay(Call& c, Choice& ch, GenerateRequest& g) {
  const ApiContinuation& k = *c.req.continuation;
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
void ApiService::Impl::append_token(Choice& ch, int32_t id) {
  ch.token_ids.push_back(id);
  ch.text += ch.stop->push(output_filter(ch, ch.detok->push(id), false));
}

// The end of generation: whatever the detokenizer, the output filter and the stop strings
// still hold.
void ApiService::Impl::end_text(Choice& ch) {
  ch.text += ch.stop->push(output_filter(ch, ch.detok->flush(), true));
  ch.text += ch.stop->flush();
}

// Generated text through the tenant's PII policy (mask, or restore pseudonyms); `last` ends it.
std::string ApiService::Impl::output_filter(Choice& ch, const std::string& piece, bool last) {
  if (ch.pii_mask) return last ? ch.pii_mask->push(piece) + ch.pii_mask->flush() : ch.pii_mask->push(piece);
  if (ch.pii_restore) return last ? ch.pii_restore->push(piece) + ch.pii_restore->flush() : ch.pii_restore->push(piece);
  return piece;
}

void ApiService::Impl::take_event(Call& c, Choice& ch, TokenEvent e) {
  if (ch.done) return;
  if (e.token >= 0 && !ch.text_done) {
    append_token(ch, e.token);
    if (c.req.logprobs >= 0) {
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
  if (!e.finish) return;
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
  finish_choice(ch, outcome);
}

void ApiService::Impl::finish_choice(Choice& ch, FinishReason outcome) {
  ch.done = true;
  ch.text_done = true;
  if (ch.stream) {
    ch.metrics = ch.stream->metrics();
    ch.stream.reset();
  }
  if (options.metrics) options.metrics->record_request(ch.metrics, outcome);
  pending.fetch_sub(1);
}

void ApiService::Impl::pump(Call& c) {
  for (Choice& ch : c.choices) {
    while (!ch.done && ch.stream) {
      std::optional<TokenEvent> e = ch.stream->try_next();
      if (!e) break;
      take_event(c, ch, std::move(*e));
      if (c.streaming) emit(c, ch);  // a chunk per token, as OpenAI streams, however far behind we are
    }
    if (c.streaming) emit(c, ch);
  }
}

// A stream's next chunk for `ch`: what it has that has not been sent (nothing when nothing new).
void ApiService::Impl::emit(Call& c, Choice& ch) {
  const ApiRequest& q = c.req;
  const bool want_ids = q.return_token_ids || q.endpoint == ApiEndpoint::Generate;
  const bool new_text = ch.sent_text < ch.text.size();
  const bool new_tokens = ch.sent_tokens < ch.token_ids.size();
  if (ch.final_sent) return;
  const bool finishing = ch.text_done;
  if (!new_text && !(want_ids && new_tokens) && !(q.logprobs >= 0 && new_tokens) && !finishing) return;
  if (finishing && (ch.finish_reason == "cancelled" || ch.finish_reason == "error")) {
    if (ch.finish_reason == "error") {
      json err = {{"error", {{"message", ch.error}, {"type", "server_error"}, {"param", nullptr}, {"code", nullptr}}}};
      c.writer.send_event(http::json_text(err));
    }
    ch.final_sent = true;
    return;
  }
  json j = chunk(c);
  json choice = {{"index", ch.index}};
  const std::string delta = ch.text.substr(ch.sent_text);
  if (q.endpoint == ApiEndpoint::ChatCompletions) {
    choice["delta"] = new_text ? json{{"content", delta}} : json::object();
  } else {
    choice["text"] = delta;
  }
  if (want_ids) {
    choice["token_ids"] = std::vector<int32_t>(ch.token_ids.begin() + static_cast<long>(ch.sent_tokens), ch.token_ids.end());
    if (!ch.prompt_ids_sent) choice["prompt_token_ids"] = c.prompt_ids[ch.prompt_index];  // what a router needs to resume it
    ch.prompt_ids_sent = true;
  }
  if (q.logprobs >= 0) {
    const size_t to = ch.logprob_events.size();
    choice["logprobs"] = q.endpoint == ApiEndpoint::ChatCompletions
                             ? chat_logprobs(ch, ch.sent_logprobs, to)
                             : completion_logprobs(c, ch, ch.sent_logprobs, to, ch.sent_text);
    ch.sent_logprobs = to;
  } else {
    choice["logprobs"] = nullptr;
  }
  choice["finish_reason"] = finishing ? json(ch.finish_reason) : json(nullptr);
  j["choices"].push_back(std::move(choice));
  ch.sent_text = ch.text.size();
  ch.sent_tokens = ch.token_ids.size();
  ch.final_sent = finishing;
  c.writer.send_event(http::json_text(j));
}

bool ApiService::Impl::complete(Call& c) const {
  if (!c.submitted) return false;
  return std::all_of(c.choices.begin(), c.choices.end(), [](const Choice& ch) { return ch.done; });
}

json ApiService::Impl::chunk(const Call& c) const {
  json j = {{"id", c.response_id},
            {"object", object_name(c.req.endpoint, true)},
            {"created", c.created},
            {"model", options.model_name},
            {"choices", json::array()}};
  if (c.req.include_usage) j["usage"] = nullptr;
  return j;
}

json ApiService::Impl::usage(const Call& c) const {
  int64_t prompt = 0, completion = 0, cached = 0;
  for (size_t p = 0; p < c.prompt_ids.size(); ++p) {
    prompt += static_cast<int64_t>(c.prompt_ids[p].size());
    int64_t hit = 0;
    for (const Choice& ch : c.choices)
      if (ch.prompt_index == p) hit = std::max(hit, ch.metrics.prefix_hit_tokens);
    cached += std::min(hit, static_cast<int64_t>(c.prompt_ids[p].size()));
  }
  for (const Choice& ch : c.choices) completion += static_cast<int64_t>(ch.token_ids.size());
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

json ApiService::Impl::completion_logprobs(const Call& c, const Choice& ch, size_t from, size_t to, size_t text_base) const {
  (void)c;
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  size_t offset = text_base;
  for (size_t i = from; i < to; ++i) {
    const TokenEvent& e = ch.logprob_events[i];
    const std::string piece = tok->token_to_piece(e.token, true);
    tokens.push_back(piece);
    lps.push_back(e.logprob);
    json top = json::object();
    for (const TokenLogprob& t : e.top_logprobs) top[tok->token_to_piece(t.token, true)] = t.logprob;
    tops.push_back(c.req.logprobs > 0 ? top : json(nullptr));
    offsets.push_back(offset);
    offset += piece.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json ApiService::Impl::chat_logprobs(const Choice& ch, size_t from, size_t to) const {
  auto entry = [&](int32_t id, float lp) {
    const std::string piece = tok->token_to_piece(id, true);
    json bytes = json::array();
    for (unsigned char b : piece) bytes.push_back(static_cast<int>(b));
    return json{{"token", piece}, {"logprob", lp}, {"bytes", bytes}};
  };
  json content = json::array();
  for (size_t i = from; i < to; ++i) {
    const TokenEvent& e = ch.logprob_events[i];
    json item = entry(e.token, e.logprob);
    json top = json::array();
    for (const TokenLogprob& t : e.top_logprobs) top.push_back(entry(t.token, t.logprob));
    item["top_logprobs"] = std::move(top);
    content.push_back(std::move(item));
  }
  return {{"content", content}};
}

void ApiService::Impl::respond(Call& c) {
  const ApiRequest& q = c.req;
  const Choice* failed = nullptr;
  for (const Choice& ch : c.choices)
    if (!ch.error.empty()) failed = &ch;
  if (c.streaming) {
    pump(c);  // the last chunks
    if (q.include_usage) {
      json j = chunk(c);
      j["usage"] = usage(c);
      c.writer.send_event(http::json_text(j));
    }
    c.writer.send_event("[DONE]");
    c.writer.end();
    return;
  }
  if (c.choices.empty()) return;  // answered already (an error)
  if (failed) {
    c.status = 500;
    c.writer.send(http::error_response(500, http::ApiError{failed->error, "", std::nullopt, std::nullopt}));
    return;
  }
  json j = {{"id", c.response_id},
            {"object", object_name(q.endpoint, false)},
            {"created", c.created},
            {"model", options.model_name}};
  if (q.endpoint == ApiEndpoint::Generate) j["seed"] = c.seed;
  json choices = json::array();
  for (const Choice& ch : c.choices) {
    json choice = {{"index", ch.index}};
    const std::string prefix = !q.echo ? std::string()
                               : c.redactor && c.redactor->policy().mode == pii::RedactMode::kPseudonymize
                                   ? c.redactor->restore(c.prompt_texts[ch.prompt_index])
                                   : c.prompt_texts[ch.prompt_index];
    if (q.endpoint == ApiEndpoint::ChatCompletions) {
      choice["message"] = {{"role", "assistant"}, {"content", ch.text}};
    } else {
      choice["text"] = prefix + ch.text;
    }
    if (q.return_token_ids || q.endpoint == ApiEndpoint::Generate) choice["token_ids"] = ch.token_ids;
    if (q.logprobs >= 0) {
      choice["logprobs"] = q.endpoint == ApiEndpoint::ChatCompletions
                               ? chat_logprobs(ch, 0, ch.logprob_events.size())
                               : completion_logprobs(c, ch, 0, ch.logprob_events.size(), prefix.size());
    } else {
      choice["logprobs"] = nullptr;
    }
    choice["finish_reason"] = ch.finish_reason;
    choices.push_back(std::move(choice));
  }
  j["choices"] = std::move(choices);
  if (q.return_token_ids || q.endpoint == ApiEndpoint::Generate) j["prompt_token_ids"] = c.prompt_ids;
  j["usage"] = usage(c);
  c.status = 200;
  c.writer.send(ordered_json_response(200, j));
}

void ApiService::Impl::fail(Call& c, int status, http::ApiError e) {
  c.status = status;
  c.writer.send(http::error_response(status, std::move(e)));
  c.choices.clear();
  c.submitted = true;
}

void ApiService::Impl::drop(Call& c) {
  for (Choice& ch : c.choices) {
    if (ch.done) continue;
    ch.stream.reset();  // cancels the engine request (it never reports back now)
    ch.done = ch.text_done = true;
    ch.finish_reason = "cancelled";
    ch.metrics.e2e_seconds = std::chrono::duration<double>(Clock::now() - c.received).count();
    ch.metrics.n_prompt = static_cast<int64_t>(c.prompt_ids[ch.prompt_index].size());
    ch.metrics.n_generated = static_cast<int64_t>(ch.token_ids.size());
    if (options.metrics) options.metrics->record_request(ch.metrics, FinishReason::Cancelled);
    pending.fetch_sub(1);
  }
}

void ApiService::Impl::reject(http::ResponseWriter& w, int status, http::ApiError e, std::string_view reason, const Requester& who,
                              std::chrono::seconds retry_after) {
  http::HttpResponse r = http::error_response(status, std::move(e));
  if (status == 429 || status == 503) http::set_retry_after(r, retry_after.count() > 0 ? retry_after : options.retry_after);
  if (status == 401) r.set_header("WWW-Authenticate", "Bearer");
  w.send(std::move(r));
  if (options.metrics) options.metrics->record_rejected(reason);
  if (options.access_log) {
    AccessRecord a;
    a.time = std::chrono::system_clock::now();
    a.request_id = who.request_id;
    a.method = who.method;
    a.path = pii::redact_for_log(who.path);  // logs never hold personal data
    a.status = status;
    a.tenant = who.tenant;
    options.access_log->write(a);
  }
  if (options.audit) {
    audit::AuditEntry e;
    e.time = std::chrono::system_clock::now();
    e.request_id = who.request_id;
    e.tenant = who.tenant;
    if (who.key) e.key_id = audit::audit_key_id(who.key->key);
    e.route = pii::redact_for_log(who.path);
    e.model = options.model_name;
    e.status = status;
    e.outcome = std::string(reason);
    audit_append(e);
  }
}

void ApiService::Impl::audit_append(const audit::AuditEntry& e) {
  // A failed append must not fail the request; it is logged (the log itself then refuses
  // further appends, and `audit verify` shows where it stopped).
  if (Result<uint64_t> r = options.audit->append(e); !r.ok())
    std::fprintf(stderr, "tokenhive serve: audit log: %s\n", r.message().c_str());
}

// A call turned away before the engine saw it (queue, concurrency or rate limits): answered
// and logged now; the responder then finishes it like any other.
void ApiService::Impl::refuse(Call& c, int status, http::ApiError e, std::string_view reason, std::chrono::seconds retry_after) {
  c.status = status;
  reject(c.writer, status, std::move(e), reason, Requester{c.request_id, "POST", c.path, c.tenant, c.key}, retry_after);
  c.logged = true;
  c.choices.clear();
  c.submitted = true;
}

// The heartbeat a router reads: what the engine runs and queues, its KV room, its recent
// output rate (over windows of at least a second), and whether it takes new work.
json ApiService::Impl::load() {
  const int s = state.load(std::memory_order_acquire);
  json j = {{"ready", s == kReady}, {"draining", s == kDraining || s == kStopped}, {"in_flight", in_flight.load()}};
  const Engine* e = engine.load(std::memory_order_acquire);
  if (!e) return j;
  const EngineStats st = e->stats();
  {
    std::lock_guard<std::mutex> l(rate_mu);
    const Clock::time_point now = Clock::now();
    const double dt = std::chrono::duration<double>(now - rate_at).count();
    if (rate_at == Clock::time_point{}) {
      rate_at = now;
      rate_tokens = st.tokens_generated;
    } else if (dt >= 1.0) {
      tokens_per_second = static_cast<double>(st.tokens_generated - rate_tokens) / dt;
      rate_at = now;
      rate_tokens = st.tokens_generated;
    }
    j["tokens_per_second"] = tokens_per_second;
  }
  j["running"] = st.running;
  j["waiting"] = st.waiting + st.swapped;
  j["kv_free_blocks"] = st.kv.primary_free;
  j["kv_total_blocks"] = st.kv.primary_blocks;
  j["max_model_len"] = e->max_model_len();
  return j;
}

bool ApiService::Impl::admin_allowed(const http::HttpRequest& r) const {
  if (options.admin_token.empty()) return options.keys == nullptr;
  return http::bearer_matches(r.header("authorization"), options.admin_token);
}

const ApiKey* ApiService::Impl::authenticate(const http::HttpRequest& r, http::ResponseWriter& w) {
  std::optional<std::string_view> auth = r.header("authorization");
  const ApiKey* key = auth ? options.keys->authenticate(*auth) : nullptr;
  if (!key)
    reject(w, 401,
           http::ApiError{auth ? "Incorrect API key provided" : "No API key provided: send Authorization: Bearer <key>", "",
                    std::nullopt, std::string("invalid_api_key")},
           "unauthorized", Requester{r.id, r.method, r.path, ""});
  return key;
}

// A call is over: settle its rate-limit charge and write its access-log line.
void ApiService::Impl::account(Call& c) {
  if (c.holds_slot) {
    c.holds_slot = false;
    if (--tenant_in_flight[c.tenant] == 0) tenant_in_flight.erase(c.tenant);
  }
  int64_t prompt = 0, completion = 0, cached = 0;
  double queue = -1, ttft = -1;
  for (const std::vector<int32_t>& p : c.prompt_ids) prompt += static_cast<int64_t>(p.size());
  for (const Choice& ch : c.choices) {
    completion += static_cast<int64_t>(ch.token_ids.size());
    cached = std::max(cached, ch.metrics.prefix_hit_tokens);
    if (ch.metrics.queue_seconds >= 0) queue = queue < 0 ? ch.metrics.queue_seconds : std::min(queue, ch.metrics.queue_seconds);
    if (ch.metrics.ttft_seconds >= 0) ttft = ttft < 0 ? ch.metrics.ttft_seconds : std::min(ttft, ch.metrics.ttft_seconds);
  }
  if (c.key && options.rate_limiter && c.token_estimate > 0)
    options.rate_limiter->charge(*c.key, prompt + completion - c.token_estimate, Clock::now());
  if (c.logged) return;
  c.logged = true;
  if (options.audit) {
    audit::AuditEntry e;
    e.time = std::chrono::system_clock::now();
    e.request_id = c.request_id;
    e.tenant = c.tenant;
    if (c.key) e.key_id = audit::audit_key_id(c.key->key);
    e.route = c.path;
    e.model = options.model_name;
    e.priority = c.req.priority;
    e.status = c.status ? c.status : 499;
    e.outcome = c.choices.empty() ? "error" : c.choices.front().finish_reason;
    e.prompt_tokens = static_cast<uint64_t>(prompt);
    e.completion_tokens = static_cast<uint64_t>(completion);
    e.latency_us = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - c.received).count());
    e.prompt_sha256 = audit::audit_texts_digest(c.prompt_texts);
    std::vector<std::string> outputs;
    for (const Choice& ch : c.choices) outputs.push_back(ch.text);
    e.output_sha256 = audit::audit_texts_digest(outputs);
    audit_append(e);
  }
  if (!options.access_log) return;
  AccessRecord a;
  a.time = std::chrono::system_clock::now();
  a.request_id = c.request_id;
  a.method = "POST";
  a.path = pii::redact_for_log(c.path);
  a.status = c.status ? c.status : 499;  // 499: the client went away first (nginx's code)
  a.tenant = c.tenant;
  a.prompt_tokens = prompt;
  a.completion_tokens = completion;
  a.cached_tokens = cached;
  a.queue_ms = queue < 0 ? -1 : queue * 1e3;
  a.ttft_ms = ttft < 0 ? -1 : ttft * 1e3;
  a.e2e_ms = std::chrono::duration<double, std::milli>(Clock::now() - c.received).count();
  if (!c.choices.empty()) a.finish_reason = c.choices.front().finish_reason;
  options.access_log->write(a);
}

// ---------------------------------------------------------------------------

ApiService::ApiService(ApiServiceOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->started_unix =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  impl_->responder = std::thread([this] {
    pthread_setname_np(pthread_self(), "th-responder");
    impl_->run();
  });
}

ApiService::~ApiService() { stop(); }

void ApiService::add_routes(http::HttpServer& server) {
  Impl* impl = impl_.get();
  server.route("GET", "/health", [](const http::HttpRequest&, http::ResponseWriter w) {
    w.send(ordered_json_response(200, json{{"status", "ok"}}));
  });
  server.route("GET", "/ready", [impl](const http::HttpRequest&, http::ResponseWriter w) {
    const int s = impl->state.load(std::memory_order_acquire);
    if (s == Impl::kReady) {
      w.send(ordered_json_response(200, json{{"status", "ready"}}));
      return;
    }
    http::HttpResponse r = ordered_json_response(503, json{{"status", s == Impl::kLoading ? "loading" : "draining"}});
    http::set_retry_after(r, impl->options.retry_after);
    w.send(std::move(r));
  });
 if (impl->options.metrics) {
    http::HttpServer* http = &server;
    server.route("GET", "/metrics", [impl, http](const http::HttpRequest&, http::ResponseWriter w) {
      ServingMetrics& m = *impl->options.metrics;
      if (const Engine* e = impl->engine.load(std::memory_order_acquire)) m.set_engine(e->stats());
      m.set_http(http->stats());
      w.send(http::text_response(200, m.render(), std::string(http::kPrometheusContentType)));
    });
  }
  server.route("GET", "/admin/load", [impl](const http::HttpRequest&, http::ResponseWriter w) { w.send(ordered_json_response(200, impl->load())); });
  server.route("POST", "/admin/drain", [impl](const http::HttpRequest& r, http::ResponseWriter w) {
    if (!impl->admin_allowed(r)) {
      w.send(http::error_response(impl->options.admin_token.empty() ? 403 : 401,
                            http::ApiError{impl->options.admin_token.empty() ? "admin endpoints need --admin-token when API keys are on"
                                                                       : "admin endpoints need Authorization: Bearer <admin token>",
                                     "", std::nullopt, std::string("admin_forbidden")}));
      return;
    }
    int expected = Impl::kReady;
    impl->state.compare_exchange_strong(expected, Impl::kDraining);
    w.send(ordered_json_response(200, json{{"status", "draining"}, {"in_flight", impl->in_flight.load()}}));
  });
  server.route("GET", "/v1/models", [impl](const http::HttpRequest& r, http::ResponseWriter w) { impl->handle_models(r, std::move(w)); });
  server.route("GET", "/v1/models/*", [impl](const http::HttpRequest& r, http::ResponseWriter w) { impl->handle_models(r, std::move(w)); });
  server.route("POST", "/v1/completions", [impl](const http::HttpRequest& r, http::ResponseWriter w) {
    impl->handle_generation(ApiEndpoint::Completions, r, std::move(w));
  });
  server.route("POST", "/v1/chat/completions", [impl](const http::HttpRequest& r, http::ResponseWriter w) {
    impl->handle_generation(ApiEndpoint::ChatCompletions, r, std::move(w));
  });
  server.route("POST", "/v1/generate", [impl](const http::HttpRequest& r, http::ResponseWriter w) {
    impl->handle_generation(ApiEndpoint::Generate, r, std::move(w));
  });
}

void ApiService::attach(Engine& engine, const Tokenizer& tokenizer, const ChatTemplate& chat_template) {
  impl_->engine.store(&engine, std::memory_order_release);
  impl_->tok = &tokenizer;
  impl_->chat = &chat_template;
  impl_->state.store(Impl::kReady, std::memory_order_release);
}

void ApiService::drain() {
  int expected = Impl::kReady;
  impl_->state.compare_exchange_strong(expected, Impl::kDraining);
  expected = Impl::kLoading;
  impl_->state.compare_exchange_strong(expected, Impl::kDraining);
}

void ApiService::stop() {
  if (!impl_->responder.joinable()) return;
  impl_->state.store(Impl::kStopped);
  {
    std::lock_guard<std::mutex> l(impl_->mailbox->m);
    impl_->mailbox->stopping = true;
  }
  impl_->mailbox->cv.notify_one();
  impl_->responder.join();
}

bool ApiService::ready() const { return impl_->state.load(std::memory_order_acquire) == Impl::kReady; }

int64_t ApiService::in_flight() const { return impl_->in_flight.load(); }

}  // namespace th::server
