#include "server/prompt_tokens.h"

#include "tokenizer/chat_template.h"

namespace th::server {

Status chat_prompt(const nlohmann::ordered_json& messages, bool add_generation_prompt, bool add_bos, const Tokenizer& tok,
                   const ChatTemplate& chat, std::string* text, std::vector<int32_t>* ids,
                   const nlohmann::ordered_json& variables) {
  const VocabData& v = tok.vocab();
  const std::string bos = v.bos >= 0 ? tok.token_to_piece(v.bos, true) : "";
  const std::string eos = v.eos >= 0 ? tok.token_to_piece(v.eos, true) : "";
  Result<std::string> rendered = chat.render_json(messages, add_generation_prompt, bos, eos, variables);
  if (!rendered.ok()) return Status::errorf("the chat template failed on these messages: ", rendered.message());
  *ids = tok.encode(*rendered, /*add_special=*/false, /*parse_special=*/true);
  if (add_bos && v.add_bos && v.bos >= 0 && (ids->empty() || ids->front() != v.bos)) ids->insert(ids->begin(), v.bos);
  *text = std::move(*rendered);
  return ok_status();
}

nlohmann::ordered_json template_variables(const ApiRequest& q) {
  nlohmann::ordered_json v = q.chat_template_kwargs;
  if (q.tools.active()) v["tools"] = q.tools.tools;
  return v;
}

Status tokenize_prompts(Call& c, const Tokenizer& tokenizer, const ChatTemplate& chat_template, std::string* param) {
  const Tokenizer* tok = &tokenizer;
  const ChatTemplate* chat = &chat_template;
  const ApiRequest& q = c.req;
  if (c.key && c.key->pii != PiiPolicy::Off) {
    pii::RedactPolicy policy;
    policy.mode = c.key->pii == PiiPolicy::Mask ? pii::RedactMode::kMask : pii::RedactMode::kPseudonymize;
    c.redactor = std::make_unique<pii::Redactor>(policy);
  }
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
    std::string text;
    std::vector<int32_t> ids;
    if (Status s = chat_prompt(q.messages, q.add_generation_prompt, /*add_bos=*/true, *tok, *chat, &text, &ids,
                           template_variables(q));
        !s.ok())
      return s;
    c.prompt_ids.push_back(std::move(ids));
    c.prompt_texts.push_back(std::move(text));
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

}  // namespace th::server
