#include "server/tokenize_api.h"

#include <limits>
#include <vector>

#include "server/prompt_tokens.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace th::server {

namespace {

using Json = nlohmann::ordered_json;

TokenizeReply bad(std::string param, std::string message) {
  TokenizeReply r;
  r.status = 400;
  r.error = http::ApiError{param + " " + message, "", param, std::nullopt};
  return r;
}

// Fields each endpoint takes; any other is refused by name (never silently ignored).
constexpr std::string_view kTokenizeFields[] = {
    "model",       "prompt", "content", "messages", "add_special_tokens", "add_special", "parse_special",
    "add_generation_prompt", "return_token_strs", "with_pieces"};
constexpr std::string_view kDetokenizeFields[] = {"model", "tokens"};

template <size_t N>
std::optional<TokenizeReply> check_fields(const Json& j, const std::string_view (&known)[N]) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || it.key() == k;
    if (!ok) return bad(it.key(), "is not supported by this endpoint");
  }
  return std::nullopt;
}

// The body as an object, the model it names checked; nullopt and `error` on failure.
std::optional<Json> parse_body(std::string_view body, const TokenizeContext& ctx, TokenizeReply* error) {
  Json j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    error->status = 400;
    error->error = http::ApiError{"the request body must be a JSON object", "", std::nullopt, std::nullopt};
    return std::nullopt;
  }
  if (auto m = j.find("model"); m != j.end() && !m->is_null()) {
    if (!m->is_string()) {
      *error = bad("model", "must be a string");
      return std::nullopt;
    }
    const std::string& name = m->get_ref<const std::string&>();
    if (!name.empty() && name != ctx.model_name) {
      error->status = 404;
      error->error = http::ApiError{cat("The model `", name, "` does not exist (this server serves `", ctx.model_name, "`)"),
                                    "", std::string("model"), std::string("model_not_found")};
      return std::nullopt;
    }
  }
  return j;
}

// A boolean field: absent or null gives `fallback`.
std::optional<bool> flag(const Json& j, const char* name, bool fallback, TokenizeReply* error) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    *error = bad(name, "must be true or false");
    return std::nullopt;
  }
  return it->get<bool>();
}

// The messages, checked as /v1/chat/completions checks them (the same parser), rendered
// and tokenized as a chat completion's prompt is.
std::optional<std::vector<int32_t>> chat_ids(const Json& j, bool add_special, const TokenizeContext& ctx,
                                             TokenizeReply* error) {
  Json chat = {{"messages", j["messages"]}};
  if (auto g = j.find("add_generation_prompt"); g != j.end()) chat["add_generation_prompt"] = *g;
  ApiParseResult parsed = parse_api_request(ApiEndpoint::ChatCompletions, chat.dump(), *ctx.limits);
  if (http::ApiError* e = std::get_if<http::ApiError>(&parsed)) {
    error->status = 400;
    error->error = std::move(*e);
    return std::nullopt;
  }
  const ApiRequest& q = std::get<ApiRequest>(parsed);
  std::string text;
  std::vector<int32_t> ids;
  if (Status s = chat_prompt(q.messages, q.add_generation_prompt, add_special, *ctx.tok, *ctx.chat, &text, &ids);
      !s.ok()) {
    *error = bad("messages", s.message());
    return std::nullopt;
  }
  return ids;
}

}  // namespace

TokenizeReply tokenize_request(std::string_view body, const TokenizeContext& ctx) {
  TokenizeReply reply;
  std::optional<Json> j = parse_body(body, ctx, &reply);
  if (!j) return reply;
  if (std::optional<TokenizeReply> e = check_fields(*j, kTokenizeFields)) return *e;
  const bool has_prompt = j->contains("prompt"), has_content = j->contains("content"), has_messages = j->contains("messages");
  if (has_prompt + has_content + has_messages != 1) {
    const char* param = has_prompt + has_content + has_messages == 0 ? "prompt" : has_messages ? "messages" : "content";
    return bad(param, "is one of three inputs: send exactly one of \"prompt\" (vLLM), \"content\" (llama-server) or "
                      "\"messages\"");
  }
  if (j->contains("add_special_tokens") && j->contains("add_special"))
    return bad("add_special", "is llama-server's name for add_special_tokens: send one of them");
  const char* special_name = j->contains("add_special") ? "add_special" : "add_special_tokens";
  // Defaults as each project has them: vLLM adds special tokens (BOS) to a prompt,
  // llama-server does not to its "content"; messages get what a chat completion feeds the model.
  std::optional<bool> add_special = flag(*j, special_name, !has_content, &reply);
  std::optional<bool> parse_special = flag(*j, "parse_special", true, &reply);
  std::optional<bool> with_pieces = flag(*j, "with_pieces", false, &reply);
  std::optional<bool> token_strs = flag(*j, "return_token_strs", false, &reply);
  if (!add_special || !parse_special || !with_pieces || !token_strs) return reply;
  std::vector<int32_t> ids;
  if (has_messages) {
    if (j->contains("parse_special")) return bad("parse_special", "applies to \"prompt\" or \"content\", not to messages");
    std::optional<std::vector<int32_t>> c = chat_ids(*j, *add_special, ctx, &reply);
    if (!c) return reply;
    ids = std::move(*c);
  } else {
    if (j->contains("add_generation_prompt")) return bad("add_generation_prompt", "applies to messages only");
    const char* name = has_prompt ? "prompt" : "content";
    const Json& text = (*j)[name];
    if (!text.is_string()) return bad(name, "must be a string");
    ids = ctx.tok->encode(text.get_ref<const std::string&>(), *add_special, *parse_special);
  }
  Json tokens = Json::array();
  Json strs = Json::array();
  for (int32_t id : ids) {
    if (*with_pieces) tokens.push_back({{"id", id}, {"piece", ctx.tok->token_to_piece(id, true)}});
    else tokens.push_back(id);
    if (*token_strs) strs.push_back(ctx.tok->token_to_piece(id, true));
  }
  reply.body = {{"tokens", std::move(tokens)}, {"count", ids.size()}, {"max_model_len", ctx.max_model_len}};
  if (*token_strs) reply.body["token_strs"] = std::move(strs);
  return reply;
}

TokenizeReply detokenize_request(std::string_view body, const TokenizeContext& ctx) {
  TokenizeReply reply;
  std::optional<Json> j = parse_body(body, ctx, &reply);
  if (!j) return reply;
  if (std::optional<TokenizeReply> e = check_fields(*j, kDetokenizeFields)) return *e;
  auto t = j->find("tokens");
  if (t == j->end() || !t->is_array()) return bad("tokens", "is required: a list of token ids");
  std::vector<int32_t> ids;
  ids.reserve(t->size());
  for (size_t i = 0; i < t->size(); ++i) {
    const Json& v = (*t)[i];
    const std::string param = cat("tokens[", i, "]");
    if (!v.is_number_integer()) return bad(param, "must be an integer token id");
    const int64_t id = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())
                           ? std::numeric_limits<int64_t>::max()
                           : v.get<int64_t>();
    if (id < 0 || id >= ctx.tok->n_vocab())
      return bad(param, cat("is ", id, ", outside the vocabulary of ", ctx.tok->n_vocab(), " tokens"));
    ids.push_back(static_cast<int32_t>(id));
  }
  // Special tokens' text included, as both projects return it.
  const std::string text = ctx.tok->decode(ids, /*render_special=*/true);
  reply.body = {{"prompt", text}, {"content", text}};
  return reply;
}

}  // namespace th::server
