#include "tokenizer/chat_template.h"

#include <cmath>
#include <new>

#include "format/gguf.h"
#include "tokenizer/unicode.h"

namespace th {

namespace {

// Templates are a few kilobytes; anything near this is not a chat template.
constexpr size_t kMaxTemplateBytes = size_t{1} << 20;

// Messages quote the template and its data (a raise_exception text, a stray
// character): control characters and bytes that are not UTF-8 are escaped so
// that the message stays one line of valid UTF-8.
std::string one_line(std::string_view m) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < m.size();) {
    const auto c = static_cast<unsigned char>(m[i]);
    if (c >= 0x80) {
      const size_t len = unicode::utf8_len(m[i]);
      if (len > 1 && i + len <= m.size() && unicode::valid_utf8_prefix(m.substr(i, len)) == len) {
        out.append(m.substr(i, len));
        i += len;
        continue;
      }
    }
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c >= 0x7F) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  return out;
}

Status template_error(const jinja::Program* program, std::string_view source, const jinja::JinjaError& e) {
  const std::string message = one_line(e.message);
  if (e.pos == jinja::JinjaError::kNoPos) return Status::errorf("chat template: ", message);
  std::pair<int, int> lc;
  if (program) {
    lc = program->source.line_col(e.pos);
  } else {
    // A parse error: positions refer to the preprocessed text of `source`.
    lc = jinja::preprocess(source).line_col(e.pos);
  }
  return Status::errorf("chat template: line ", lc.first, ", column ", lc.second, ": ", message);
}

jinja::Value json_value(const nlohmann::ordered_json& j, uint32_t depth) {
  using jinja::Value;
  if (depth > jinja::kMaxValueDepth) jinja::fail("JSON nested too deeply for a chat template");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::null();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(static_cast<double>(j.get<int64_t>()));
    case nlohmann::ordered_json::value_t::number_unsigned: return Value::integer(static_cast<double>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: {
      // JSON.parse makes 1.0 the integer 1; the reference renderer sees that.
      const double d = j.get<double>();
      return std::isfinite(d) && std::floor(d) == d ? Value::integer(d) : Value::floating(d);
    }
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(json_value(x, depth + 1));
      return Value::array(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto o = std::make_shared<jinja::ObjectData>();
      for (const auto& [k, v] : j.items()) o->set(k, json_value(v, depth + 1));
      return Value::object(std::move(o));
    }
    default: jinja::fail("unsupported JSON value in a chat template context");
  }
}

}  // namespace

Result<jinja::Value> json_to_template_value(const nlohmann::ordered_json& j) {
  try {
    return json_value(j, 0);
  } catch (const jinja::JinjaError& e) {
    return Status::error("chat template: " + one_line(e.message));
  }
}

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  if (source.size() > kMaxTemplateBytes)
    return Status::errorf("chat template: ", source.size(), " bytes is too large (limit ", kMaxTemplateBytes, ")");
  try {
    return ChatTemplate(jinja::parse_template(source));
  } catch (const jinja::JinjaError& e) {
    return template_error(nullptr, source, e);
  } catch (const std::bad_alloc&) {
    return Status::error("chat template: out of memory while parsing");
  }
}

const char* ChatTemplate::chatml_source() {
  return "{%- for message in messages -%}\n"
         "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n"
         "{%- endfor -%}\n"
         "{%- if add_generation_prompt -%}\n"
         "{{- '<|im_start|>assistant\\n' -}}\n"
         "{%- endif -%}\n";
}

const std::string& ChatTemplate::source() const { return program_->source.original; }

Result<std::string> ChatTemplate::render_context(std::vector<std::pair<std::string, jinja::Value>> context) const {
  try {
    jinja::Interpreter in(*program_, limits_);
    return in.render(context);
  } catch (const jinja::JinjaError& e) {
    return template_error(program_.get(), program_->source.original, e);
  } catch (const std::bad_alloc&) {
    return Status::error("chat template: out of memory while rendering");
  }
}

Result<std::string> ChatTemplate::render_with(jinja::Value messages, bool add_generation_prompt,
                                              const std::string& bos_token, const std::string& eos_token,
                                              const nlohmann::ordered_json& extra) const {
  std::vector<std::pair<std::string, jinja::Value>> context;
  context.emplace_back("messages", std::move(messages));
  context.emplace_back("add_generation_prompt", jinja::Value::boolean(add_generation_prompt));
  context.emplace_back("bos_token", jinja::Value::string(bos_token));
  context.emplace_back("eos_token", jinja::Value::string(eos_token));
  if (!extra.is_null()) {
    if (!extra.is_object()) return Status::error("chat template: the extra context must be a JSON object");
    for (const auto& [k, v] : extra.items()) {
      TH_ASSIGN_OR_RETURN(jinja::Value value, json_to_template_value(v));
      context.emplace_back(k, std::move(value));
    }
  }
  return render_context(std::move(context));
}

Result<std::string> ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                         const std::string& bos_token, const std::string& eos_token,
                                         const nlohmann::ordered_json& extra) const {
  std::vector<jinja::Value> list;
  list.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    auto o = std::make_shared<jinja::ObjectData>();
    o->set("role", jinja::Value::string(m.role));
    o->set("content", jinja::Value::string(m.content));
    list.push_back(jinja::Value::object(std::move(o)));
  }
  return render_with(jinja::Value::array(std::move(list)), add_generation_prompt, bos_token, eos_token, extra);
}

Result<std::string> ChatTemplate::render_json(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                              const std::string& bos_token, const std::string& eos_token,
                                              const nlohmann::ordered_json& extra) const {
  if (!messages.is_array()) return Status::error("chat template: messages must be a JSON array");
  TH_ASSIGN_OR_RETURN(jinja::Value list, json_to_template_value(messages));
  return render_with(std::move(list), add_generation_prompt, bos_token, eos_token, extra);
}

Result<ChatTemplate> chat_template_for(const GgufFile& file) {
  constexpr const char* kKey = "tokenizer.chat_template";
  std::string source;
  if (file.has(kKey)) {
    TH_ASSIGN_OR_RETURN(source, file.get_string(kKey));
  }
  if (source.empty()) return ChatTemplate::parse(ChatTemplate::chatml_source());
  Result<ChatTemplate> t = ChatTemplate::parse(source);
  if (!t.ok()) return Status::errorf(file.name(), ": ", t.message());
  return t;
}

}  // namespace th
