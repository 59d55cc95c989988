#include "server/tool_request.h"

#include <cctype>
#include <unordered_set>

#include "grammar/json_schema.h"
#include "server/api_request.h"

namespace th::server {

namespace {

using Json = nlohmann::ordered_json;

http::ApiError bad(const std::string& param, std::string_view why) {
  return http::ApiError{cat(param, " ", why), "", param, std::nullopt};
}

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > kMaxToolNameBytes) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

const Json* member(const Json& o, const char* key) {
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::optional<http::ApiError> read_tool(const Json& t, const std::string& p, std::unordered_set<std::string>& names) {
  if (!t.is_object()) return bad(p, "must be an object {\"type\": \"function\", \"function\": {...}}");
  const Json* type = member(t, "type");
  if (!type || *type != "function") return bad(p + ".type", "must be \"function\" (the only kind of tool)");
  const Json* f = member(t, "function");
  if (!f || !f->is_object()) return bad(p + ".function", "must be an object {\"name\": ..., \"parameters\": {...}}");
  for (const auto& [key, v] : f->items())
    if (key != "name" && key != "description" && key != "parameters" && key != "strict")
      return bad(p + ".function." + one_line(key), "is not a field of a function (name, description, parameters, strict)");
  const Json* name = member(*f, "name");
  if (!name || !name->is_string() || !valid_name(name->get_ref<const std::string&>()))
    return bad(p + ".function.name", "must be 1 to 64 of a-z, A-Z, 0-9, _ and -");
  if (!names.insert(name->get<std::string>()).second)
    return bad(p + ".function.name", cat("\"", name->get_ref<const std::string&>(), "\" is given twice"));
  if (const Json* d = member(*f, "description"); d && !d->is_string()) return bad(p + ".function.description", "must be a string");
  if (const Json* s = member(*f, "parameters"); s && !s->is_object())
    return bad(p + ".function.parameters", "must be a JSON schema object");
  if (const Json* s = member(*f, "strict"); s && !s->is_boolean()) return bad(p + ".function.strict", "must be true or false");
  return std::nullopt;
}

std::optional<http::ApiError> read_choice(const Json& c, const std::unordered_set<std::string>& names, ToolRequest* out) {
  if (c.is_string()) {
    const std::string& s = c.get_ref<const std::string&>();
    if (s == "none") out->choice = ToolChoice::None;
    else if (s == "auto") out->choice = ToolChoice::Auto;
    else if (s == "required") out->choice = ToolChoice::Required;
    else return bad("tool_choice", "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  } else if (c.is_object()) {
    const Json* type = member(c, "type");
    const Json* f = member(c, "function");
    const Json* name = f && f->is_object() ? member(*f, "name") : nullptr;
    if (!type || *type != "function" || !name || !name->is_string())
      return bad("tool_choice", "must be {\"type\": \"function\", \"function\": {\"name\": ...}} to name a function");
    if (!names.count(name->get<std::string>()))
      return bad("tool_choice.function.name", cat("\"", one_line(name->get_ref<const std::string&>()), "\" is not one of the tools"));
    out->choice = ToolChoice::Named;
    out->named = name->get<std::string>();
  } else {
    return bad("tool_choice", "must be a string or an object");
  }
  if (out->choice != ToolChoice::None && out->choice != ToolChoice::Auto && names.empty())
    return bad("tool_choice", "asks for a tool call but no tools are given");
  return std::nullopt;
}

// An assistant message's tool_calls: [{"id"?, "type": "function", "function": {"name", "arguments"}}].
std::optional<http::ApiError> read_message_calls(Json& calls, const std::string& p) {
  if (!calls.is_array()) return bad(p, "must be an array of {\"id\": ..., \"type\": \"function\", \"function\": {...}}");
  for (size_t i = 0; i < calls.size(); ++i) {
    Json& c = calls[i];
    const std::string q = cat(p, "[", i, "]");
    if (!c.is_object()) return bad(q, "must be an object");
    if (const Json* id = member(c, "id"); id && !id->is_string()) return bad(q + ".id", "must be a string");
    if (const Json* t = member(c, "type"); t && *t != "function") return bad(q + ".type", "must be \"function\"");
    auto f = c.find("function");
    if (f == c.end() || !f->is_object()) return bad(q + ".function", "must be an object {\"name\": ..., \"arguments\": ...}");
    const Json* name = member(*f, "name");
    if (!name || !name->is_string()) return bad(q + ".function.name", "must be a string");
    auto a = f->find("arguments");
    if (a == f->end() || a->is_null()) continue;
    if (a->is_string()) {
      Json parsed = Json::parse(a->get_ref<const std::string&>(), nullptr, false);
      if (!parsed.is_object()) return bad(q + ".function.arguments", "must be a JSON object, or a string holding one");
      *a = std::move(parsed);
    } else if (!a->is_object()) {
      return bad(q + ".function.arguments", "must be a JSON object, or a string holding one");
    }
  }
  return std::nullopt;
}

// A tool a demanded call may name: any, or the named one.
bool may_call(const ToolRequest& r, const Json& tool) {
  return r.choice != ToolChoice::Named || tool["function"]["name"] == r.named;
}

}  // namespace

std::vector<std::string> ToolRequest::callable() const {
  if (choice == ToolChoice::Named) return {named};
  std::vector<std::string> out;
  for (const Json& t : tools) out.push_back(t["function"]["name"].get<std::string>());
  return out;
}

std::optional<http::ApiError> read_tool_fields(const Json* tools, const Json* tool_choice, Json& messages, ToolRequest* out) {
  std::unordered_set<std::string> names;
  if (tools) {
    if (!tools->is_array()) return bad("tools", "must be an array of {\"type\": \"function\", \"function\": {...}}");
    if (tools->size() > kMaxTools) return bad("tools", cat("must hold at most ", kMaxTools, " tools, got ", tools->size()));
    for (size_t i = 0; i < tools->size(); ++i)
      if (auto e = read_tool((*tools)[i], cat("tools[", i, "]"), names)) return e;
    out->tools = *tools;
  }
  if (tool_choice)
    if (auto e = read_choice(*tool_choice, names, out)) return e;
  for (size_t i = 0; i < messages.size(); ++i) {
    Json& m = messages[i];
    const std::string p = cat("messages[", i, "]");
    if (auto c = m.find("tool_calls"); c != m.end() && !c->is_null()) {
      if (m["role"] != "assistant") return bad(p + ".tool_calls", "belongs to assistant messages only");
      if (auto e = read_message_calls(*c, p + ".tool_calls")) return e;
    }
    if (const Json* id = member(m, "tool_call_id"); id && !id->is_string()) return bad(p + ".tool_call_id", "must be a string");
  }
  return std::nullopt;
}

std::optional<Json> tool_call_schema(const ToolRequest& r, const std::string& args_key) {
  if (!r.active() || r.choice == ToolChoice::Auto) return std::nullopt;
  auto call_schema = [&](const Json& fn) {
    Json params = fn.contains("parameters") && fn["parameters"].is_object() ? fn["parameters"] : Json{{"type", "object"}};
    return Json{{"type", "object"},
                {"properties", {{"name", {{"const", fn["name"]}}}, {args_key, std::move(params)}}},
                {"required", {"name", args_key}},
                {"additionalProperties", false}};
  };
  Json any = Json::array();
  for (const Json& t : r.tools)
    if (may_call(r, t)) any.push_back(call_schema(t["function"]));
  return any.size() == 1 ? any[0] : Json{{"anyOf", any}};
}

std::variant<std::optional<std::string>, http::ApiError> tool_call_gbnf(const ToolRequest& r, ToolCallFormat format) {
  const std::string args_key = format == ToolCallFormat::Llama3 ? "parameters" : "arguments";
  std::optional<Json> schema = tool_call_schema(r, args_key);
  if (!schema) return std::optional<std::string>{};
  grammar::SchemaOptions options;
  options.root = "call";
  options.strict = true;
  for (const Json& t : r.tools)
    if (may_call(r, t)) options.strict = options.strict && t["function"].value("strict", false);
  Result<std::string> call = grammar::json_schema_to_gbnf(*schema, options);
  if (!call.ok()) {  // name the function whose parameters did not compile
    for (size_t i = 0; i < r.tools.size(); ++i) {
      const Json& fn = r.tools[i]["function"];
      if (!fn.contains("parameters")) continue;
      if (Result<std::string> one = grammar::json_schema_to_gbnf(fn["parameters"], options); !one.ok())
        return bad(cat("tools[", i, "].function.parameters"), cat("cannot be enforced for tool_choice: ", one.message()));
    }
    return bad("tool_choice", cat("cannot be enforced: ", call.message()));
  }
  const bool many = r.parallel && r.choice == ToolChoice::Required;
  std::string root;
  switch (format) {
    case ToolCallFormat::Hermes:
      root = "tool-call ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\nroot ::= tool-call";
      if (many) root += " (\"\\n\" tool-call)*";
      break;
    case ToolCallFormat::Llama3:  // one call: Llama 3.1's JSON format has no list of calls
      root = "root ::= call";
      break;
    case ToolCallFormat::Mistral:
      root = many ? "root ::= \"[TOOL_CALLS][\" call (\", \" call)* \"]\"" : "root ::= \"[TOOL_CALLS][\" call \"]\"";
      break;
  }
  return std::optional<std::string>{*call + root + "\n"};
}

}  // namespace th::server
