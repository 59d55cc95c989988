// Chat templates: turning a conversation into the prompt text a model was
// trained on, with the Jinja template the model ships in its GGUF
// (`tokenizer.chat_template`, copied from Hugging Face's tokenizer_config.json).
//
// Rendering matches @huggingface/jinja (and so transformers'
// apply_chat_template) byte for byte on the common templates; see
// jinja_value.h for the semantics and docs/CONVENTIONS.md for the fallback.
// Templates come from model files, so a bad or hostile one gives a one-line
// error with its line and column, never a crash, a hang or unbounded memory.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "tokenizer/jinja_interpreter.h"

namespace th {

class GgufFile;

/// @brief One message of a conversation.
struct ChatMessage {
  std::string role;
  std::string content;
};

using ChatTemplateLimits = jinja::RenderLimits;

class ChatTemplate {
 public:
  /// @brief Parses `source`. A syntax error is one line naming the line and column.
  static Result<ChatTemplate> parse(std::string_view source);

  /// @brief The template llama.cpp falls back to when a model has none: ChatML
  /// (<|im_start|>role\ncontent<|im_end|>\n per message, then
  /// <|im_start|>assistant\n when add_generation_prompt).
  static const char* chatml_source();

  /// @brief Renders a conversation. The template sees `messages` (a list of
  /// {role, content} dicts), `add_generation_prompt`, `bos_token`,
  /// `eos_token`, and every key of `extra` (an object: tools, date_string, ...).
  Result<std::string> render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                             const std::string& bos_token, const std::string& eos_token,
                             const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  /// @brief As render(), with the messages as JSON (an array of objects), for
  /// messages with more than role and content (tool_calls, name, ...).
  Result<std::string> render_json(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                  const std::string& bos_token, const std::string& eos_token,
                                  const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  /// @brief Replaces the default limits on work, memory, output and nesting.
  void set_limits(const ChatTemplateLimits& limits) { limits_ = limits; }
  const std::string& source() const;

 private:
  explicit ChatTemplate(std::shared_ptr<const jinja::Program> program) : program_(std::move(program)) {}
  Result<std::string> render_with(jinja::Value messages, bool add_generation_prompt, const std::string& bos_token,
                                  const std::string& eos_token, const nlohmann::ordered_json& extra) const;
  Result<std::string> render_context(std::vector<std::pair<std::string, jinja::Value>> context) const;

  std::shared_ptr<const jinja::Program> program_;
  ChatTemplateLimits limits_;
};

/// @brief The model's chat template (`tokenizer.chat_template`), or the ChatML
/// fallback when the file has none (or an empty one). A template that does
/// not parse is an error naming the file.
Result<ChatTemplate> chat_template_for(const GgufFile& file);

/// @brief A JSON value as a template value (objects keep their key order;
/// integral numbers are integers, as JavaScript's JSON.parse makes them).
/// Nesting deeper than jinja::kMaxValueDepth is an error.
Result<jinja::Value> json_to_template_value(const nlohmann::ordered_json& j);

}  // namespace th
