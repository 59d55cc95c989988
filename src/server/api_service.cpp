#include "server/api_service.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"
#include "http/http_server.h"
#include "server/admission.h"
#include "server/api_call.h"
#include "server/call_record.h"
#include "server/choice_text.h"
#include "server/embeddings_api.h"
#include "server/grammar_constraint.h"
#include "server/structured_output.h"
#include "server/openai_format.h"
#include "server/prompt_tokens.h"
#include "server/serving_metrics.h"
#include "server/tokenize_api.h"
#include "server/tool_call_response.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace th::server {

namespace {

using json = WireJson;
using Clock = ApiClock;

// Who asked, for the logs of a request refused before it became a call.
struct Requester {
  std::string request_id, method, path, client;
  const ApiKey* key = nullptr;
};

http::HttpResponse ordered_json_response(int status, const json& body) {
  http::HttpResponse r;
  r.status = status;
  r.set_header("Content-Type", "application/json");
  r.body = http::json_text(body);
  return r;
}

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

// More than one Authorization header: which one counts would be the server's guess (and a
// proxy in front may have judged the other), so the request is refused.
bool duplicate_authorization(const http::HttpRequest& r) {
  int n = 0;
  for (const http::HttpHeader& h : r.headers) n += h.name == "authorization";
  return n > 1;
}

http::ApiError duplicate_authorization_error() {
  return http::ApiError{"the request has more than one Authorization header; send exactly one", "", std::nullopt,
                        std::string("duplicate_header")};
}

std::string strip_request_prefix(const std::string& message) {
  constexpr std::string_view kPrefix = "request: ";
  return message.rfind(kPrefix, 0) == 0 ? message.substr(kPrefix.size()) : message;
}

}  // namespace

struct ApiService::Impl {
  explicit Impl(ApiServiceOptions o)
      : options(std::move(o)), mailbox(std::make_shared<Mailbox>()),
        admission(options.max_pending, options.rate_limiter), rng(std::random_device{}()) {}

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
  ToolCallFormat tool_format = ToolCallFormat::Hermes;  // from the chat template (tool_call_parser.h)
  std::vector<int32_t> tool_markers;  // its markers that are single tokens, rendered for the parser
  std::unique_ptr<EmbeddingService> embeddings;  // POST /v1/embeddings, once attached
  std::thread responder;
  int64_t started_unix = 0;

  // Responder thread only.
  std::unordered_map<uint64_t, std::shared_ptr<Call>> calls;
  Admission admission;
  std::mt19937_64 rng;
  std::shared_ptr<const GrammarVocab> grammar_vocab;  // built at the first structured-output request

  // --- event-loop side
  void handle_generation(ApiEndpoint ep, const http::HttpRequest& r, http::ResponseWriter w);
  void handle_models(const http::HttpRequest& r, http::ResponseWriter w);
  void handle_tokenize(bool detokenize, const http::HttpRequest& r, http::ResponseWriter w);
  bool check_ready(const http::HttpRequest& r, http::ResponseWriter& w);
  const ApiKey* authenticate(const http::HttpRequest& r, http::ResponseWriter& w);
  void reject(http::ResponseWriter& w, int status, http::ApiError e, std::string_view reason, const Requester& who,
              std::chrono::seconds retry_after = std::chrono::seconds(0));

  // --- responder side: intake
  void run();
  void start_call(const std::shared_ptr<Call>& call);
  bool submit(Call& c, const std::string& param);
  void refuse(Call& c, Refusal no);
  // --- the engine's tokens into text
  void pump(Call& c);
  void finish_choice(Choice& ch, FinishReason outcome);
  // --- the answer
  void emit(Call& c, Choice& ch);
  void send_event(Call& c, std::string_view data);
  void send(Call& c, http::HttpResponse r);
  PieceOf piece_of() const;
  bool complete(Call& c) const;
  void respond(Call& c);
  void fail(Call& c, int status, http::ApiError e);
  void cancel(Call& c);
  void drop(Call& c);
  void account(Call& c);

  json load();
  bool admin_allowed(const http::HttpRequest& r) const;
  std::mutex rate_mu;  // the tokens/s window of load()
  Clock::time_point rate_at{};
  int64_t rate_tokens = 0;
  double tokens_per_second = 0;
};

// ---------------------------------------------------------------------------
// Event loops: parse, check, hand over.

bool ApiService::Impl::check_ready(const http::HttpRequest& r, http::ResponseWriter& w) {
  const int s = state.load(std::memory_order_acquire);
  if (s == kReady) return true;
  reject(w, 503,
         http::ApiError{s == kLoading ? "the model is still loading" : "the server is shutting down", "", std::nullopt,
                  std::string(s == kLoading ? "loading" : "draining")},
         "not_ready", Requester{r.id, r.method, r.path, r.peer});
  return false;
}

void ApiService::Impl::handle_generation(ApiEndpoint ep, const http::HttpRequest& r, http::ResponseWriter w) {
  if (!check_ready(r, w)) return;
  const ApiKey* key = nullptr;
  if (options.keys && !(key = authenticate(r, w))) return;
  const Requester who{r.id, r.method, r.path, r.peer, key};
  ApiParseResult parsed = parse_api_request(ep, r.body, options.limits);
  if (http::ApiError* e = std::get_if<http::ApiError>(&parsed)) {
    reject(w, 400, std::move(*e), "invalid", who);
    return;
  }
  auto call = std::make_shared<Call>();
  call->req = std::move(std::get<ApiRequest>(parsed));
  if (key) {
    // Without a priority, a key capped below normal asks for its cap (not normal, a 403).
    if (!call->req.priority_given) call->req.priority = std::max(call->req.priority, key->max_priority);
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
  call->client = r.peer;
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

// Cheap and synchronous (no engine): answered on the event loop, after the same readiness
// and key checks as generation.
void ApiService::Impl::handle_tokenize(bool detokenize, const http::HttpRequest& r, http::ResponseWriter w) {
  if (!check_ready(r, w) || (options.keys && !authenticate(r, w))) return;
  const Engine* e = engine.load(std::memory_order_acquire);
  const TokenizeContext ctx{tok, chat, e ? e->max_model_len() : 0, options.model_name, &options.limits};
  TokenizeReply reply = detokenize ? detokenize_request(r.body, ctx) : tokenize_request(r.body, ctx);
  w.send(reply.status == 200 ? ordered_json_response(200, reply.body) : http::error_response(reply.status, reply.error));
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
    for (std::shared_ptr<Call>& c : incoming) {
      calls.emplace(c->id, c);
      start_call(c);
      woken.push_back(c->id);
    }
    // After the intake: a client can go before its call was started.
    for (uint64_t id : gone) {
      auto it = calls.find(id);
      if (it != calls.end()) it->second->client_gone = true;
    }
    for (uint64_t id : gone) woken.push_back(id);
    std::sort(woken.begin(), woken.end());
    woken.erase(std::unique(woken.begin(), woken.end()), woken.end());
    for (uint64_t id : woken) {
      auto it = calls.find(id);
      if (it == calls.end()) continue;
      Call& c = *it->second;
      if (c.client_gone) {
        // Cancelled, then kept until the engine's final events bring each choice's metrics
        // (queue and first-token times of what it did generate).
        cancel(c);
        pump(c);
        if (!complete(c)) continue;
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

void ApiService::Impl::start_call(const std::shared_ptr<Call>& cp) {
  Call& c = *cp;
  std::string param;
  if (Status s = tokenize_prompts(c, *tok, *chat, &param); !s.ok()) {
    fail(c, 400, http::ApiError{s.message(), "", param, std::nullopt});
    if (options.metrics) options.metrics->record_rejected("invalid");
    return;
  }
  if (c.req.tools.active()) {
    c.tool_format = tool_format;
    if (std::optional<http::ApiError> e = enforce_tool_choice(c.req, tool_format)) {
      fail(c, 400, std::move(*e));
      if (options.metrics) options.metrics->record_rejected("invalid");
      return;
    }
  }
  if (std::optional<Refusal> no = admission.admit(c, pending.load(), Clock::now())) {
    refuse(c, std::move(*no));
    return;
  }
  c.seed = c.req.seed_given ? c.req.sampling.seed : rng() >> 1;
  if (!submit(c, param)) return;
  c.submitted = true;
  if (!c.req.stream) return;
  if (!c.writer.start_sse()) {
    c.client_gone = true;
    return;
  }
  c.streaming = true;
  c.status = 200;
  if (std::optional<json> first = opening_chunk(c, options.model_name)) send_event(c, http::json_text(*first));
}

// Every choice into the engine (or, for a continuation that already ended, not). False when
// the engine refused one: what was submitted is cancelled and the call answered 400.
bool ApiService::Impl::submit(Call& c, const std::string& param) {
  const ApiRequest& q = c.req;
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
      if (c.tool_format) start_tool_parsing(c, ch, tool_markers);
      ch.stop.emplace(q.stop, q.include_stop_str_in_output);
      if (c.redactor && c.redactor->policy().mode == pii::RedactMode::kMask) ch.pii_mask = std::make_unique<pii::StreamingRedactor>(*c.redactor);
      if (c.redactor && c.redactor->policy().mode == pii::RedactMode::kPseudonymize)
        ch.pii_restore = std::make_unique<pii::StreamingRestorer>(*c.redactor);
      GenerateRequest g;
      g.prompt = c.prompt_ids[p];
      g.sampling = q.sampling;
      g.sampling.seed = c.seed + static_cast<uint64_t>(i);  // n choices: n different draws
      g.max_tokens = q.max_tokens > 0 ? q.max_tokens : (q.endpoint == ApiEndpoint::Completions ? 16 : -1);
      if (q.continuation && replay_continuation(*q.continuation, ch, g)) {
        c.choices.push_back(std::move(ch));  // it ended within what the first cell generated
        continue;
      }
      g.stop_token_ids = q.stop_token_ids;
      g.ignore_eos = q.ignore_eos;
      g.priority = q.priority;
      g.compute_type = q.compute_type;
      g.tenant = c.tenant;
      g.cache_salt = q.cache_salt;
      g.logprobs = q.logprobs;
      g.min_tokens = q.min_tokens;
      Status constrained = constrain(q, grammar_vocab, *tok, g);
      Result<RequestStream> s = !constrained.ok() ? Result<RequestStream>(constrained)
          : engine.load(std::memory_order_acquire)->submit(std::move(g), [mb, call_id] { mb->wake(call_id, false); });
      if (!s.ok()) {
        for (Choice& done : c.choices) {  // cancel what was submitted
          if (!done.stream) continue;
          done.stream.reset();
          pending.fetch_sub(1);
        }
        const bool compute = q.compute_type != ComputeType::Auto && s.message().find("compute type") != std::string::npos;
        fail(c, 400, http::ApiError{strip_request_prefix(s.message()), "", std::string(compute ? "compute_type" : param), std::nullopt});
        if (options.metrics) options.metrics->record_rejected("invalid");
        return false;
      }
      pending.fetch_add(1);
      ch.stream.emplace(std::move(*s));
      c.choices.push_back(std::move(ch));
    }
  }
  return true;
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
      if (std::optional<FinishReason> outcome = take_event(ch, std::move(*e), c.req.logprobs >= 0))
        finish_choice(ch, *outcome);
      if (c.streaming && !c.client_gone) emit(c, ch);  // a chunk per token, as OpenAI streams, however far behind we are
    }
    if (c.streaming && !c.client_gone) emit(c, ch);
  }
}

// A stream's next chunk for `ch`: what it has that has not been sent (nothing when nothing new).
void ApiService::Impl::emit(Call& c, Choice& ch) {
  while (std::optional<std::string> e = next_event(c, ch, options.model_name, piece_of())) send_event(c, *e);
}

void ApiService::Impl::send_event(Call& c, std::string_view data) {
  if (c.writer.send_event(data)) c.bytes_out += static_cast<int64_t>(http::sse_event_bytes(data));
}

PieceOf ApiService::Impl::piece_of() const {
  const Tokenizer* t = tok;
  return [t](int32_t id) { return t->token_to_piece(id, true); };
}

bool ApiService::Impl::complete(Call& c) const {
  if (!c.submitted) return false;
  return std::all_of(c.choices.begin(), c.choices.end(), [](const Choice& ch) { return ch.done; });
}

void ApiService::Impl::respond(Call& c) {
  if (c.streaming) {
    pump(c);  // the last chunks
    if (c.req.include_usage) {
      json j = chunk_header(c, options.model_name);
      j["usage"] = usage_json(c);
      send_event(c, http::json_text(j));
    }
    send_event(c, "[DONE]");
    c.writer.end();
    return;
  }
  if (c.choices.empty()) return;  // answered already (an error)
  for (const Choice& ch : c.choices) {
    if (ch.error.empty()) continue;
    send(c, http::error_response(500, http::ApiError{ch.error, "", std::nullopt, std::nullopt}));
    return;
  }
  send(c, ordered_json_response(200, response_body(c, options.model_name, piece_of())));
}

void ApiService::Impl::send(Call& c, http::HttpResponse r) {
  c.status = r.status;
  const int64_t bytes = static_cast<int64_t>(r.body.size());
  if (c.writer.send(std::move(r))) c.bytes_out += bytes;
}

void ApiService::Impl::fail(Call& c, int status, http::ApiError e) {
  send(c, http::error_response(status, std::move(e)));
  c.choices.clear();
  c.submitted = true;
}

void ApiService::Impl::cancel(Call& c) {
  for (Choice& ch : c.choices)
    if (!ch.done && ch.stream) ch.stream->cancel();
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
  const int64_t bytes = static_cast<int64_t>(r.body.size());
  const bool sent = w.send(std::move(r));
  if (options.metrics) options.metrics->record_rejected(reason);
  write_record(refusal_record(who.request_id, who.method, who.path, who.client, who.key, options.model_name, status,
                              reason, sent ? bytes : 0),
               options.access_log, options.audit);
}

// A call turned away before the engine saw it (queue, concurrency or rate limits): answered
// and logged now; the responder then finishes it like any other.
void ApiService::Impl::refuse(Call& c, Refusal no) {
  c.status = no.status;
  reject(c.writer, no.status, std::move(no.error), no.reason, Requester{c.request_id, "POST", c.path, c.client, c.key},
         no.retry_after);
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
  if (duplicate_authorization(r)) {
    reject(w, 400, duplicate_authorization_error(), "invalid", Requester{r.id, r.method, r.path, r.peer});
    return nullptr;
  }
  std::optional<std::string_view> auth = r.header("authorization");
  const ApiKey* key = auth ? options.keys->authenticate(*auth) : nullptr;
  if (!key)
    reject(w, 401,
           http::ApiError{auth ? "Incorrect API key provided" : "No API key provided: send Authorization: Bearer <key>", "",
                    std::nullopt, std::string("invalid_api_key")},
           "unauthorized", Requester{r.id, r.method, r.path, r.peer});
  return key;
}

// A call is over: free its tenant slot, settle its rate-limit charge, write its record.
void ApiService::Impl::account(Call& c) {
  int64_t used = 0;
  for (const std::vector<int32_t>& p : c.prompt_ids) used += static_cast<int64_t>(p.size());
  for (const Choice& ch : c.choices) used += static_cast<int64_t>(ch.token_ids.size());
  admission.release(c, used, Clock::now());
  if (c.logged) return;
  c.logged = true;
  for (const Choice& ch : c.choices)
    if (options.metrics && !ch.finish_reason.empty())
      options.metrics->record_call(c.tenant, c.req.priority, ch.finish_reason, static_cast<int64_t>(ch.token_ids.size()));
  write_record(call_record(c, options.model_name), options.access_log, options.audit);
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
  // llama-server's /health: 503 while the model loads and while draining, so that a load
  // balancer probing /health alone sends nothing to a cell that cannot serve it.
  for (const char* path : {"/health", "/ready"}) {
    const char* ok = path == std::string_view("/health") ? "ok" : "ready";
    server.route("GET", path, [impl, ok](const http::HttpRequest&, http::ResponseWriter w) {
      const int s = impl->state.load(std::memory_order_acquire);
      if (s == Impl::kReady) return void(w.send(ordered_json_response(200, json{{"status", ok}})));
      http::HttpResponse r = ordered_json_response(503, json{{"status", s == Impl::kLoading ? "loading" : "draining"}});
      http::set_retry_after(r, impl->options.retry_after);
      w.send(std::move(r));
    });
  }
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
    if (duplicate_authorization(r)) {
      w.send(http::error_response(400, duplicate_authorization_error()));
      return;
    }
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
  server.route("POST", "/v1/embeddings", [impl](const http::HttpRequest& r, http::ResponseWriter w) {
    const ApiKey* key = nullptr;
    if (impl->check_ready(r, w) && (!impl->options.keys || (key = impl->authenticate(r, w))))
      impl->embeddings->handle(r, std::move(w), key);
  });
  server.route("POST", "/tokenize", [impl](const http::HttpRequest& r, http::ResponseWriter w) { impl->handle_tokenize(false, r, std::move(w)); });
  server.route("POST", "/detokenize", [impl](const http::HttpRequest& r, http::ResponseWriter w) { impl->handle_tokenize(true, r, std::move(w)); });
  server.route("POST", "/v1/generate", [impl](const http::HttpRequest& r, http::ResponseWriter w) {
    impl->handle_generation(ApiEndpoint::Generate, r, std::move(w));
  });
}

void ApiService::attach(Engine& engine, const Tokenizer& tokenizer, const ChatTemplate& chat_template, Pooling pooling) {
  impl_->engine.store(&engine, std::memory_order_release);
  impl_->tok = &tokenizer;
  impl_->chat = &chat_template;
  impl_->tool_format = detect_tool_call_format(chat_template.source());
  impl_->tool_markers = tool_marker_ids(impl_->tool_format, tokenizer);
  EmbeddingServiceOptions e{impl_->options.model_name, impl_->options.limits, impl_->options.max_pending,
                            [o = &impl_->options](const CallRecord& r) { write_record(r, o->access_log, o->audit); },
                            impl_->options.metrics, impl_->options.rate_limiter};
  impl_->embeddings = std::make_unique<EmbeddingService>(engine, tokenizer, pooling, engine.hidden_size(), std::move(e));
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
  impl_->embeddings.reset();
}

bool ApiService::ready() const { return impl_->state.load(std::memory_order_acquire) == Impl::kReady; }

int64_t ApiService::in_flight() const {
  return impl_->in_flight.load() + (impl_->embeddings ? impl_->embeddings->in_flight() : 0);
}

}  // namespace th::server
