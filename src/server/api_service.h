// The API of one cell: OpenAI's /v1/completions and /v1/chat/completions, the
// native /v1/generate, /v1/models, /health, /ready and /metrics, on an
// HttpServer, in front of one Engine; and for a router in front of many cells,
// GET /admin/load (the heartbeat: running, waiting, KV room, tokens/s,
// draining) and POST /admin/drain.
//
// Threads: handlers run on the server's event loops and only parse, check the
// key and hand the call over. One responder thread owns every call from then
// on: it renders chat templates, tokenizes, submits to the engine, and turns
// the engine's token events into text (incremental detokenization, stop
// strings) and into JSON responses or SSE chunks. The engine wakes it through
// the streams' event listener; a client that disconnects wakes it through the
// writer's on_close, and its requests are cancelled.
//
//   ApiService api(options);
//   api.add_routes(server);        // before server.start()
//   ... load the model ...
//   api.attach(engine, tokenizer, chat_template);   // now /ready says 200
//   ... SIGTERM ...
//   api.drain();                   // new work gets 503; in-flight work goes on
//   server.shutdown(deadline);     // cut what is left (those requests are cancelled)
//   api.stop();
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "server/api_request.h"

namespace th {
class Engine;
class Tokenizer;
class ChatTemplate;
}  // namespace th
namespace th::http {
class HttpServer;
}
namespace th::audit {
class AuditLog;
}

namespace th::server {

class ApiKeyStore;
class RateLimiter;
class AccessLog;
class ServingMetrics;

struct ApiServiceOptions {
  std::string model_name = "default";  // the id /v1/models lists and requests must name
  // Generation requests (choices) in the engine at once; over it: 429 with Retry-After.
  int64_t max_pending = 256;
  std::chrono::seconds retry_after{1};
  ApiRequestLimits limits;
  // Optional collaborators (not owned; must outlive the service). Without keys every
  // request is tenant "" with no limits.
  const ApiKeyStore* keys = nullptr;
  RateLimiter* rate_limiter = nullptr;
  AccessLog* access_log = nullptr;
  ServingMetrics* metrics = nullptr;
  audit::AuditLog* audit = nullptr;  // one tamper-evident entry per request (digests, never text)
  // POST /admin/drain needs "Authorization: Bearer <admin_token>" when set. Unset, it is
  // open without API keys (like every endpoint) and refused (403) with them.
  std::string admin_token;
};

class ApiService {
 public:
  explicit ApiService(ApiServiceOptions options);
  /// @brief stop().
  ~ApiService();
  ApiService(const ApiService&) = delete;
  ApiService& operator=(const ApiService&) = delete;

  /// @brief Registers every route on `server` (before it starts).
  void add_routes(http::HttpServer& server);
  /// @brief The model is loaded: generation endpoints open and /ready says 200. The
  /// engine must be running (Engine::start) and, with the tokenizer and template,
  /// outlive stop().
  /// `pooling` is what /v1/embeddings pools the final hidden states with.
  void attach(Engine& engine, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
              Pooling pooling = Pooling::Mean);
  /// @brief Not ready any more: new generation requests get 503; in-flight ones go on.
  void drain();
  /// @brief Cancels whatever is in flight and joins the responder thread.
  void stop();
  bool ready() const;
  /// @brief Calls (HTTP requests) accepted and not yet answered completely.
  int64_t in_flight() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace th::server
