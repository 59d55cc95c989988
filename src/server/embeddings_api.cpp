#include "server/embeddings_api.h"

#include <pthread.h>

#include <cmath>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <list>
#include <mutex>
#include <thread>

#include "engine/engine.h"
#include "server/rate_limiter.h"
#include "server/serving_metrics.h"
#include "tokenizer/tokenizer.h"

namespace th::server {

namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kMaxInputs = 2048;  // OpenAI's limit on inputs per request

http::ApiError bad(const std::string& param, std::string_view why) {
  return http::ApiError{cat(param, " ", why), "", param, std::nullopt};
}

// Nesting counted on the bytes before a DOM exists (nlohmann's destructor recurses).
size_t nesting(std::string_view s) {
  size_t depth = 0, most = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      most = std::max(most, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return most;
}

std::optional<http::ApiError> token_list(const Json& list, const std::string& param, std::vector<int32_t>* out) {
  if (list.empty()) return bad(param, "must not be an empty list of token ids");
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& t = list[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max())
      return bad(cat(param, "[", i, "]"), "must be a token id, an integer from 0 to 2147483647");
    out->push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return std::nullopt;
}

std::optional<http::ApiError> read_input(const Json& in, std::vector<ApiPrompt>* out) {
  constexpr std::string_view kForms =
      "must be a string, an array of strings, an array of token ids or an array of arrays of token ids";
  auto text = [&](const Json& s, const std::string& param) -> std::optional<http::ApiError> {
    if (s.get_ref<const std::string&>().empty()) return bad(param, "must not be an empty string");
    out->push_back(ApiPrompt{false, s.get<std::string>(), {}});
    return std::nullopt;
  };
  if (in.is_string()) return text(in, "input");
  if (!in.is_array()) return bad("input", kForms);
  if (in.empty()) return bad("input", "must not be an empty list");
  if (in.size() > kMaxInputs) return bad("input", cat("must hold at most ", kMaxInputs, " inputs, got ", in.size()));
  if (in[0].is_number()) {
    ApiPrompt p{true, {}, {}};
    if (auto e = token_list(in, "input", &p.tokens)) return e;
    out->push_back(std::move(p));
    return std::nullopt;
  }
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string param = cat("input[", i, "]");
    if (in[0].is_string()) {
      if (!in[i].is_string()) return bad(param, "must be a string, as every input of a list of strings");
      if (auto e = text(in[i], param)) return e;
    } else if (in[0].is_array()) {
      if (!in[i].is_array()) return bad(param, "must be an array of token ids, as every input of a list of token lists");
      ApiPrompt p{true, {}, {}};
      if (auto e = token_list(in[i], param, &p.tokens)) return e;
      out->push_back(std::move(p));
    } else {
      return bad(param, kForms.substr(5));
    }
  }
  return std::nullopt;
}

}  // namespace

std::variant<EmbeddingsRequest, http::ApiError> parse_embeddings_request(std::string_view body, const ApiRequestLimits& limits) {
  if (nesting(body) > limits.max_depth)
    return http::ApiError{cat("invalid JSON: arrays and objects nested deeper than ", limits.max_depth, " levels"), "",
                          std::nullopt, std::nullopt};
  const Json j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return http::ApiError{"the request body must be a JSON object", "", std::nullopt, std::nullopt};
  EmbeddingsRequest r;
  for (const auto& [key, v] : j.items()) {
    if (v.is_null()) continue;  // null means absent
    if (key == "input") {
      if (auto e = read_input(v, &r.inputs)) return *e;
    } else if (key == "model" || key == "user") {
      const size_t most = key == "model" ? limits.max_model_bytes : limits.max_user_bytes;
      if (!v.is_string() || v.get_ref<const std::string&>().size() > most)
        return bad(key, cat("must be a string of at most ", most, " bytes"));
      (key == "model" ? r.model : r.user) = v.get<std::string>();
    } else if (key == "encoding_format") {
      if (v != "float" && v != "base64") return bad(key, "must be \"float\" or \"base64\"");
      r.base64 = v == "base64";
    } else if (key == "dimensions") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1) return bad(key, "must be a positive integer");
      r.dimensions = v.get<int64_t>();
    } else {
      return bad(one_line(key), "is not a field of /v1/embeddings here: it would be ignored, so it is refused");
    }
  }
  if (r.inputs.empty()) return bad("input", "is required: a string, strings or token ids");
  return r;
}

void l2_normalize(std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  if (sum == 0) return;
  const double inv = 1.0 / std::sqrt(sum);
  for (float& x : v) x = static_cast<float>(x * inv);
}

std::string base64_floats(const std::vector<float>& v) {
  static constexpr char kTable[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * 4, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<char>((u >> (8 * b)) & 0xFF);  // little-endian
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t x = 0;
    for (size_t k = 0; k < 3; ++k) x = (x << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kTable[(x >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

Json embeddings_body(const std::vector<std::vector<float>>& vectors, bool base64, std::string_view model, int64_t prompt_tokens) {
  Json data = Json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    Json e = {{"object", "embedding"}, {"index", i}};
    e["embedding"] = base64 ? Json(base64_floats(vectors[i])) : Json(vectors[i]);
    data.push_back(std::move(e));
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

// ---------------------------------------------------------------------------

namespace {
std::string input_param(const EmbeddingsRequest& q, size_t i) { return q.inputs.size() == 1 ? std::string("input") : cat("input[", i, "]"); }
}  // namespace

struct EmbeddingService::Impl {
  struct Job {
    http::ResponseWriter writer;
    CallRecord record;                    // filled at intake, finished when answered
    std::chrono::steady_clock::time_point received;
    std::vector<std::string> prompt_texts;  // for the audit digest: texts, or token ids' bytes
    std::vector<RequestStream> streams;
    std::vector<bool> finished;  // per stream: its final event came (its metrics recorded)
    std::vector<std::vector<float>> vectors;
    size_t done = 0;
    bool base64 = false;
    int64_t prompt_tokens = 0;
    std::atomic<bool> gone{false};  // the client closed
    std::string error;
  };

  Engine* engine;
  const Tokenizer* tok;
  EmbeddingServiceOptions o;
  std::atomic<int64_t> pending{0};    // inputs in the engine
  std::atomic<int64_t> in_flight{0};  // requests not yet answered
  Pooling pooling;
  int64_t hidden_size;

  std::mutex m;
  std::condition_variable cv;
  bool woken = false, stopping = false;
  std::vector<std::shared_ptr<Job>> incoming;  // under m
  std::list<std::shared_ptr<Job>> jobs;         // the collector thread's
  std::thread collector;

  void wake() {
    {
      std::lock_guard<std::mutex> l(m);
      woken = true;
    }
    cv.notify_one();
  }

  // The collector: each job's events taken as they come; a job answered once all its
  // vectors are in (or dropped when its client left: its streams' destruction cancels them).
  void run() {
    for (;;) {
      {
        std::unique_lock<std::mutex> l(m);
        cv.wait(l, [&] { return woken || stopping; });
        if (stopping) return;
        woken = false;
        for (auto& j : incoming) jobs.push_back(std::move(j));
        incoming.clear();
      }
      for (auto it = jobs.begin(); it != jobs.end();) {
        Job& j = **it;
        if (!j.gone) collect(j);
        if (j.gone && o.metrics)  // as a generation's cancelled choices: the engine ends them now
          for (size_t i = 0; i < j.streams.size(); ++i)
            if (!j.finished[i]) o.metrics->record_request(j.streams[i].metrics(), FinishReason::Cancelled);
        if (j.gone && o.log) {
          j.record.time = std::chrono::system_clock::now();
          j.record.outcome = "cancelled";
          j.record.finish_reason = "cancelled";
          j.record.prompt_tokens = j.prompt_tokens;
          o.log(j.record);  // status 0: logged as 499
        }
        if (j.gone || j.done == j.streams.size()) {
          pending.fetch_sub(static_cast<int64_t>(j.streams.size()));
          in_flight.fetch_sub(1);
          it = jobs.erase(it);
        } else {
          ++it;
        }
      }
    }
  }

  void collect(Job& j) {
    for (size_t i = 0; i < j.streams.size(); ++i) {
      while (std::optional<TokenEvent> e = j.streams[i].try_next()) {
        if (!e->finish) continue;
        ++j.done;
        j.finished[i] = true;
        if (o.metrics) o.metrics->record_request(j.streams[i].metrics(), *e->finish);
        if (*e->finish == FinishReason::Stop && !e->embedding.empty()) j.vectors[i] = std::move(e->embedding);
        else if (j.error.empty()) j.error = e->error.empty() ? "the engine did not finish this input" : e->error;
      }
    }
    if (j.done < j.streams.size()) return;
    http::HttpResponse r;
    if (!j.error.empty()) {
      r = http::error_response(500, http::ApiError{j.error, "", std::nullopt, std::nullopt});
    } else {
      for (std::vector<float>& v : j.vectors) l2_normalize(v);
      r.status = 200;
      r.set_header("Content-Type", "application/json");
      r.body = http::json_text(embeddings_body(j.vectors, j.base64, o.model_name, j.prompt_tokens));
    }
    CallRecord& rec = j.record;
    rec.time = std::chrono::system_clock::now();
    rec.status = r.status;
    rec.outcome = rec.finish_reason = j.error.empty() ? "stop" : "error";
    rec.prompt_tokens = j.prompt_tokens;
    rec.e2e_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - j.received).count();
    rec.prompt_sha256 = audit::audit_texts_digest(j.prompt_texts);
    std::vector<std::string> outputs;  // each vector's float32 bytes
    for (const std::vector<float>& v : j.vectors) outputs.emplace_back(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    rec.output_sha256 = audit::audit_texts_digest(outputs);
    const int64_t bytes = static_cast<int64_t>(r.body.size());
    if (j.writer.send(std::move(r))) rec.bytes_out = bytes;
    if (o.log) o.log(rec);
  }
};

EmbeddingService::EmbeddingService(Engine& engine, const Tokenizer& tok, Pooling pooling, int64_t hidden_size,
                                   EmbeddingServiceOptions options)
    : impl_(std::make_shared<Impl>()) {
  impl_->o = std::move(options);
  impl_->engine = &engine;
  impl_->tok = &tok;
  impl_->pooling = pooling;
  impl_->hidden_size = hidden_size;
  Impl* impl = impl_.get();
  impl_->collector = std::thread([impl] {
    pthread_setname_np(pthread_self(), "th-embeddings");
    impl->run();
  });
}

EmbeddingService::~EmbeddingService() {
  {
    std::lock_guard<std::mutex> l(impl_->m);
    impl_->stopping = true;
  }
  impl_->cv.notify_one();
  impl_->collector.join();
  impl_->jobs.clear();  // their streams cancel what is left
  impl_->incoming.clear();
}

void EmbeddingService::handle(const http::HttpRequest& r, http::ResponseWriter w, const ApiKey* key) {
  const std::string tenant = key ? key->tenant : "";
  // A refusal: answered and logged now.
  auto refuse = [&](http::HttpResponse answer, std::string_view reason) {
    const int status = answer.status;
    const int64_t bytes = static_cast<int64_t>(answer.body.size());
    const bool sent = w.send(std::move(answer));
    if (impl_->o.metrics) impl_->o.metrics->record_rejected(reason);
    if (impl_->o.log)
      impl_->o.log(refusal_record(r.id, r.method, r.path, r.peer, key, impl_->o.model_name, status, reason, sent ? bytes : 0));
  };
  std::variant<EmbeddingsRequest, http::ApiError> parsed = parse_embeddings_request(r.body, impl_->o.limits);
  if (auto* e = std::get_if<http::ApiError>(&parsed)) {
    refuse(http::error_response(400, std::move(*e)), "invalid");
    return;
  }
  const EmbeddingsRequest& q = std::get<EmbeddingsRequest>(parsed);
  if (!q.model.empty() && q.model != impl_->o.model_name) {
    refuse(http::error_response(404, http::ApiError{cat("The model `", q.model, "` does not exist (this server serves `",
                                                        impl_->o.model_name, "`)"),
                                                    "", std::string("model"), std::string("model_not_found")}),
           "invalid");
    return;
  }
  if (q.dimensions && *q.dimensions != impl_->hidden_size) {
    refuse(http::error_response(400, bad("dimensions", cat("must be ", impl_->hidden_size,
                                                           " (the model's hidden size): vectors are not shortened"))),
           "invalid");
    return;
  }
  // As generation choices are: at most max_pending inputs in the engine, else 429.
  const int64_t n = static_cast<int64_t>(q.inputs.size());
  if (n > impl_->o.max_pending) {
    refuse(http::error_response(400, bad("input", cat("holds ", n, " inputs; this server takes at most ", impl_->o.max_pending,
                                                      " at once (--max-pending)"))),
           "invalid");
    return;
  }
  if (impl_->pending.fetch_add(n) + n > impl_->o.max_pending) {
    impl_->pending.fetch_sub(n);
    http::HttpResponse busy = http::error_response(
        429, http::ApiError{cat("the server is busy: more than ", impl_->o.max_pending, " inputs would be in progress; retry shortly"),
                            "", std::nullopt, std::string("queue_full")});
    http::set_retry_after(busy, std::chrono::seconds(1));
    refuse(std::move(busy), "queue_full");
    return;
  }
  // What is not handed to the collector below gives its share back.
  struct Claim {
    Impl* impl;
    int64_t n;
    ~Claim() {
      if (impl) impl->pending.fetch_sub(n);
    }
  } claim{impl_.get(), n};
  auto job = std::make_shared<Impl::Job>();
  job->received = std::chrono::steady_clock::now();
  job->record = refusal_record(r.id, r.method, r.path, r.peer, key, impl_->o.model_name, 0, "", 0);
  job->base64 = q.base64;
  job->vectors.resize(q.inputs.size());
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < q.inputs.size(); ++i) {
    const ApiPrompt& in = q.inputs[i];
    prompts.push_back(in.is_tokens ? in.tokens : impl_->tok->encode(in.text, /*add_special=*/true, /*parse_special=*/true));
    for (int32_t id : prompts.back())
      if (id >= impl_->tok->n_vocab()) {
        refuse(http::error_response(400, bad(input_param(q, i), cat("holds token ", id, ", outside the vocabulary of ",
                                                                    impl_->tok->n_vocab()))),
               "invalid");
        return;
      }
    job->prompt_texts.push_back(in.is_tokens ? std::string(reinterpret_cast<const char*>(in.tokens.data()), in.tokens.size() * 4)
                                             : in.text);
    job->prompt_tokens += static_cast<int64_t>(prompts.back().size());
  }
  if (key && impl_->o.rate_limiter) {  // the exact cost is known: nothing to settle later
    RateLimiter::Decision d = impl_->o.rate_limiter->admit(*key, job->prompt_tokens, std::chrono::steady_clock::now());
    if (!d.allowed) {
      http::HttpResponse limited = http::error_response(429, rate_limit_error(d));
      http::set_retry_after(limited, d.retry_after);
      refuse(std::move(limited), "rate_limited");
      return;
    }
  }
  std::shared_ptr<Impl> impl = impl_;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerateRequest g;
    g.prompt = std::move(prompts[i]);
    g.pooling = impl_->pooling;
    g.tenant = tenant;
    Result<RequestStream> s = impl_->engine->submit(std::move(g), [impl] { impl->wake(); });
    if (!s.ok()) {
      std::string why = s.message();
      if (why.rfind("request: ", 0) == 0) why.erase(0, 9);
      refuse(http::error_response(400, bad(input_param(q, i), cat("cannot be embedded: ", why))), "invalid");
      return;  // job's streams (if any) are dropped: cancelled
    }
    job->streams.push_back(std::move(*s));
  }
  job->finished.assign(job->streams.size(), false);
  job->writer = w;
  std::weak_ptr<Impl::Job> weak = job;
  w.on_close([impl, weak] {
    if (auto j = weak.lock()) j->gone = true;
    impl->wake();
  });
  claim.impl = nullptr;  // the collector gives it back when the job ends
  impl_->in_flight.fetch_add(1);
  {
    std::lock_guard<std::mutex> l(impl_->m);
    impl_->incoming.push_back(std::move(job));
    impl_->woken = true;
  }
  impl_->cv.notify_one();
}

int64_t EmbeddingService::in_flight() const { return impl_->in_flight.load(); }

}  // namespace th::server
