// A call's prompts as token ids: the chat template rendered and tokenized,
// completion prompts tokenized (or token-id prompts checked against the
// vocabulary), a continuation's ids taken as they are. With a PII policy the
// text is redacted first, so personal data never reaches the model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "server/api_call.h"

namespace th {
class ChatTemplate;
}

namespace th::server {

/// @brief A chat's prompt: `messages` rendered by the template and tokenized (special
/// tokens' text parsed), BOS put first when the vocabulary adds it and add_bos is set.
/// `variables` are more template variables (template_variables()).
Status chat_prompt(const nlohmann::ordered_json& messages, bool add_generation_prompt, bool add_bos, const Tokenizer& tok,
                   const ChatTemplate& chat, std::string* text, std::vector<int32_t>* ids,
                   const nlohmann::ordered_json& variables = nlohmann::ordered_json::object());

/// @brief A chat request's template variables beyond messages: its chat_template_kwargs,
/// and `tools` when tools are active (tool_choice none renders none).
nlohmann::ordered_json template_variables(const ApiRequest& q);

/// @brief Fills c.prompt_ids and c.prompt_texts (one per prompt). On error, `param`
/// names the request field at fault ("messages", "prompt", "continuation").
Status tokenize_prompts(Call& c, const Tokenizer& tok, const ChatTemplate& chat, std::string* param);

}  // namespace th::server
