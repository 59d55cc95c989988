#include "server/openai_format.h"

#include <algorithm>

#include "http/http_response.h"
#include "server/tool_call_response.h"

namespace th::server {

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

WireJson chunk_header(const Call& c, std::string_view model) {
  WireJson j = {{"id", c.response_id},
                {"object", object_name(c.req.endpoint, true)},
                {"created", c.created},
                {"model", model},
                {"choices", WireJson::array()}};
  if (c.req.include_usage) j["usage"] = nullptr;
  return j;
}

WireJson usage_json(const Call& c) {
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

WireJson completion_logprobs(const std::vector<TokenEvent>& events, size_t from, size_t to, size_t text_base,
                             bool with_top, const PieceOf& piece_of) {
  WireJson tokens = WireJson::array(), lps = WireJson::array(), tops = WireJson::array(), offsets = WireJson::array();
  size_t offset = text_base;
  for (size_t i = from; i < to && i < events.size(); ++i) {
    const TokenEvent& e = events[i];
    const std::string piece = piece_of(e.token);
    tokens.push_back(piece);
    lps.push_back(e.logprob);
    WireJson top = WireJson::object();
    for (const TokenLogprob& t : e.top_logprobs) top[piece_of(t.token)] = t.logprob;
    tops.push_back(with_top ? top : WireJson(nullptr));
    offsets.push_back(offset);
    offset += piece.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

WireJson chat_logprobs(const std::vector<TokenEvent>& events, size_t from, size_t to, const PieceOf& piece_of) {
  auto entry = [&](int32_t id, float lp) {
    const std::string piece = piece_of(id);
    WireJson bytes = WireJson::array();
    for (unsigned char b : piece) bytes.push_back(static_cast<int>(b));
    return WireJson{{"token", piece}, {"logprob", lp}, {"bytes", bytes}};
  };
  WireJson content = WireJson::array();
  for (size_t i = from; i < to && i < events.size(); ++i) {
    const TokenEvent& e = events[i];
    WireJson item = entry(e.token, e.logprob);
    WireJson top = WireJson::array();
    for (const TokenLogprob& t : e.top_logprobs) top.push_back(entry(t.token, t.logprob));
    item["top_logprobs"] = std::move(top);
    content.push_back(std::move(item));
  }
  return {{"content", content}};
}

namespace {

WireJson logprobs_of(const Call& c, const Choice& ch, size_t from, size_t to, size_t text_base, const PieceOf& piece) {
  if (c.req.logprobs < 0) return nullptr;
  return c.req.endpoint == ApiEndpoint::ChatCompletions
             ? chat_logprobs(ch.logprob_events, from, to, piece)
             : completion_logprobs(ch.logprob_events, from, to, text_base, c.req.logprobs > 0, piece);
}

bool wants_token_ids(const ApiRequest& q) { return q.return_token_ids || q.endpoint == ApiEndpoint::Generate; }

}  // namespace

std::optional<WireJson> opening_chunk(const Call& c, std::string_view model) {
  const ApiRequest& q = c.req;
  if ((q.endpoint != ApiEndpoint::ChatCompletions && !q.echo) || q.continuation) return std::nullopt;
  // OpenAI's first chat chunk carries the role; echo sends the prompt first.
  WireJson j = chunk_header(c, model);
  for (const Choice& ch : c.choices) {
    WireJson choice = {{"index", ch.index}};
    if (q.endpoint == ApiEndpoint::ChatCompletions) {
      choice["delta"] = {{"role", "assistant"}, {"content", ""}};
    } else {
      choice["text"] = c.prompt_texts[ch.prompt_index];
    }
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = nullptr;
    j["choices"].push_back(std::move(choice));
  }
  return j;
}

std::optional<std::string> next_event(const Call& c, Choice& ch, std::string_view model, const PieceOf& piece) {
  const ApiRequest& q = c.req;
  const bool want_ids = wants_token_ids(q);
  if (ch.final_sent) return std::nullopt;
  // A chat with tools sends its parser's deltas, one per chunk.
  const bool tools = ch.tool_parser != nullptr;
  if (tools) queue_tool_deltas(c, ch);
  const bool new_text = tools ? !ch.tool_deltas.empty() : ch.sent_text < ch.text.size();
  const bool new_tokens = ch.sent_tokens < ch.token_ids.size();
  const bool finishing = ch.text_done && (!tools || ch.tool_deltas.empty());
  if (!new_text && !(want_ids && new_tokens) && !(q.logprobs >= 0 && new_tokens) && !finishing) return std::nullopt;
  if (finishing && (ch.finish_reason == "cancelled" || ch.finish_reason == "error")) {
    ch.final_sent = true;
    if (ch.finish_reason != "error") return std::nullopt;
    WireJson err = {{"error", {{"message", ch.error}, {"type", "server_error"}, {"param", nullptr}, {"code", nullptr}}}};
    return http::json_text(err);
  }
  WireJson j = chunk_header(c, model);
  WireJson choice = {{"index", ch.index}};
  const std::string delta = ch.text.substr(ch.sent_text);
  if (tools) {
    choice["delta"] = new_text ? std::move(ch.tool_deltas.front()) : WireJson::object();
    if (new_text) ch.tool_deltas.pop_front();
  } else if (q.endpoint == ApiEndpoint::ChatCompletions) {
    choice["delta"] = new_text ? WireJson{{"content", delta}} : WireJson::object();
  } else {
    choice["text"] = delta;
  }
  if (want_ids) {
    choice["token_ids"] = std::vector<int32_t>(ch.token_ids.begin() + static_cast<long>(ch.sent_tokens), ch.token_ids.end());
    if (!ch.prompt_ids_sent) choice["prompt_token_ids"] = c.prompt_ids[ch.prompt_index];  // what a router needs to resume it
    ch.prompt_ids_sent = true;
  }
  const size_t to = ch.logprob_events.size();
  choice["logprobs"] = logprobs_of(c, ch, ch.sent_logprobs, to, ch.sent_text, piece);
  if (q.logprobs >= 0) ch.sent_logprobs = to;
  choice["finish_reason"] = !finishing ? WireJson(nullptr) : WireJson(tools ? tool_finish_reason(ch) : ch.finish_reason);
  j["choices"].push_back(std::move(choice));
  ch.sent_text = ch.text.size();
  ch.sent_tokens = ch.token_ids.size();
  ch.final_sent = finishing;
  return http::json_text(j);
}

WireJson response_body(const Call& c, std::string_view model, const PieceOf& piece) {
  const ApiRequest& q = c.req;
  WireJson j = {{"id", c.response_id}, {"object", object_name(q.endpoint, false)}, {"created", c.created}, {"model", model}};
  if (q.endpoint == ApiEndpoint::Generate) j["seed"] = c.seed;
  WireJson choices = WireJson::array();
  for (const Choice& ch : c.choices) {
    WireJson choice = {{"index", ch.index}};
    const std::string prefix = !q.echo ? std::string()
                               : c.redactor && c.redactor->policy().mode == pii::RedactMode::kPseudonymize
                                   ? c.redactor->restore(c.prompt_texts[ch.prompt_index])
                                   : c.prompt_texts[ch.prompt_index];
    std::string finish_reason = ch.finish_reason;
    if (q.endpoint == ApiEndpoint::ChatCompletions && c.tool_format) {
      choice["message"] = tool_message(c, ch, &finish_reason);
    } else if (q.endpoint == ApiEndpoint::ChatCompletions) {
      choice["message"] = {{"role", "assistant"}, {"content", ch.text}};
    } else {
      choice["text"] = prefix + ch.text;
    }
    if (wants_token_ids(q)) choice["token_ids"] = ch.token_ids;
    choice["logprobs"] = logprobs_of(c, ch, 0, ch.logprob_events.size(), prefix.size(), piece);
    choice["finish_reason"] = finish_reason;
    choices.push_back(std::move(choice));
  }
  j["choices"] = std::move(choices);
  if (wants_token_ids(q)) j["prompt_token_ids"] = c.prompt_ids;
  j["usage"] = usage_json(c);
  return j;
}

}  // namespace th::server
