#include "server/structured_output.h"

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/regex_grammar.h"
#include "server/tool_request.h"

namespace th::server {

namespace {

using Json = nlohmann::ordered_json;

http::ApiError refuse(const std::string& param, std::string_view why) {
  return http::ApiError{cat(param, " ", why), "", param, std::nullopt};
}

// A compiler's message echoes pieces of the request (keywords, rule names): kept to one
// line, and short, as one_line keeps echoed text.
http::ApiError bad(const std::string& param, std::string_view what, const std::string& message) {
  std::string m = message.substr(0, 200);
  for (char& c : m)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = '?';
  if (message.size() > 200) m += "...";
  return refuse(param, cat("is not a valid ", what, ": ", m));
}

// What one field asks for, before compiling.
struct Ask {
  enum Kind { Schema, Gbnf, Regex, Choice } kind;
  const Json* value;
  std::string param;
  bool strict = false;
};

std::optional<http::ApiError> compile(const Ask& a, ApiRequest& r) {
  std::string gbnf;
  switch (a.kind) {
    case Ask::Schema: {
      Json parsed;
      const Json* schema = a.value;
      if (schema->is_string()) {  // vLLM takes guided_json as the schema's JSON text too
        parsed = Json::parse(schema->get_ref<const std::string&>(), nullptr, false);
        if (parsed.is_discarded()) return refuse(a.param, "is a string but not JSON text of a schema");
        schema = &parsed;
      }
      grammar::SchemaOptions o;
      o.strict = a.strict;
      Result<std::string> g = grammar::json_schema_to_gbnf(*schema, o);
      if (!g.ok()) return bad(a.param, "JSON schema here", g.message());
      gbnf = std::move(g).value();
      break;
    }
    case Ask::Gbnf:
      if (!a.value->is_string()) return refuse(a.param, "must be a string of GBNF");
      gbnf = a.value->get<std::string>();
      break;
    case Ask::Regex: {
      if (!a.value->is_string()) return refuse(a.param, "must be a string (a regular expression)");
      Result<std::string> e = grammar::regex_to_gbnf(a.value->get_ref<const std::string&>(), {});
      if (!e.ok()) return bad(a.param, "regular expression here", e.message());
      gbnf = "root ::= " + *e + "\n";
      break;
    }
    case Ask::Choice: {
      std::vector<std::string> choices;
      if (a.value->is_array())
        for (const Json& c : *a.value)
          if (c.is_string()) choices.push_back(c.get<std::string>());
      if (!a.value->is_array() || a.value->empty() || choices.size() != a.value->size())
        return refuse(a.param, "must be a non-empty array of strings");
      Result<std::string> g = grammar::choice_to_gbnf(choices);
      if (!g.ok()) return bad(a.param, "choice list", g.message());
      gbnf = std::move(g).value();
      break;
    }
  }
  Result<grammar::Grammar> g = grammar::parse_gbnf(gbnf);
  if (!g.ok()) return bad(a.param, a.kind == Ask::Gbnf ? "GBNF grammar" : "constraint (as a grammar)", g.message());
  r.grammar = std::make_shared<const grammar::Grammar>(std::move(g).value());
  r.grammar_param = a.param;
  return std::nullopt;
}

// response_format: text (nothing), json_object (any object, or llama-server's "schema"
// member), json_schema (OpenAI's {"name", "description", "schema", "strict"}).
std::optional<http::ApiError> read_response_format(const Json& v, std::vector<Ask>& asks) {
  static const Json kAnyObject = Json::parse(R"({"type":"object"})");
  if (!v.is_object()) return refuse("response_format", "must be an object such as {\"type\": \"json_object\"}");
  auto type = v.find("type");
  if (type == v.end() || !type->is_string()) return refuse("response_format.type", "must be \"text\", \"json_object\" or \"json_schema\"");
  for (const auto& [k, x] : v.items())
    if (k != "type" && !(k == "json_schema" && *type == "json_schema") && !(k == "schema" && *type == "json_object"))
      return refuse("response_format." + one_line(k), cat("is not a member of response_format {\"type\": ", type->dump(), "}"));
  if (*type == "text") return std::nullopt;
  if (*type == "json_object") {
    auto s = v.find("schema");
    asks.push_back({Ask::Schema, s == v.end() ? &kAnyObject : &*s, s == v.end() ? "response_format" : "response_format.schema"});
    return std::nullopt;
  }
  if (*type != "json_schema") return refuse("response_format.type", "must be \"text\", \"json_object\" or \"json_schema\"");
  auto js = v.find("json_schema");
  if (js == v.end() || !js->is_object())
    return refuse("response_format.json_schema", "must be an object {\"name\": ..., \"schema\": {...}, \"strict\": true}");
  for (const auto& [k, x] : js->items()) {
    if (k != "name" && k != "description" && k != "schema" && k != "strict")
      return refuse("response_format.json_schema." + one_line(k), "is not a member of json_schema (name, description, schema, strict)");
  }
  auto strict = js->find("strict");
  if (strict != js->end() && !strict->is_boolean() && !strict->is_null())
    return refuse("response_format.json_schema.strict", "must be true or false");
  auto schema = js->find("schema");
  if (schema == js->end() || !schema->is_object()) return refuse("response_format.json_schema.schema", "must be a JSON schema object");
  asks.push_back({Ask::Schema, &*schema, "response_format.json_schema.schema", strict != js->end() && strict->is_boolean() && strict->get<bool>()});
  return std::nullopt;
}

}  // namespace

std::optional<http::ApiError> read_structured_output(const RequestFields& fields, ApiRequest& r) {
  auto present = [&](std::string_view name) -> const Json* {
    auto it = fields.find(name);
    return it == fields.end() || it->second->is_null() ? nullptr : it->second;
  };
  std::vector<Ask> asks;
  if (const Json* v = present("response_format"))
    if (auto e = read_response_format(*v, asks)) return e;
  if (const Json* v = present("json_schema")) asks.push_back({Ask::Schema, v, "json_schema"});
  if (const Json* v = present("grammar")) asks.push_back({Ask::Gbnf, v, "grammar"});
  if (const Json* v = present("guided_json")) asks.push_back({Ask::Schema, v, "guided_json"});
  if (const Json* v = present("guided_regex")) asks.push_back({Ask::Regex, v, "guided_regex"});
  if (const Json* v = present("guided_choice")) asks.push_back({Ask::Choice, v, "guided_choice"});
  if (const Json* v = present("guided_grammar")) asks.push_back({Ask::Gbnf, v, "guided_grammar"});
  if (const Json* v = present("structured_outputs")) {
    if (!v->is_object()) return refuse("structured_outputs", "must be an object with one of json, regex, choice, grammar");
    static constexpr std::pair<const char*, Ask::Kind> kMembers[] = {
        {"json", Ask::Schema}, {"regex", Ask::Regex}, {"choice", Ask::Choice}, {"grammar", Ask::Gbnf}};
    for (const auto& [k, x] : v->items()) {
      bool known = false;
      for (const auto& [name, kind] : kMembers) {
        if (k != name) continue;
        known = true;
        if (!x.is_null()) asks.push_back({kind, &x, "structured_outputs." + k});
      }
      if (!known) return refuse("structured_outputs." + one_line(k), "is not supported (json, regex, choice or grammar)");
    }
  }
  if (asks.size() > 1)
    return refuse(asks[1].param, cat("and ", asks[0].param, " both ask for structured output: give one of them"));
  if (asks.empty()) return std::nullopt;
  return compile(asks[0], r);
}

std::optional<http::ApiError> enforce_tool_choice(ApiRequest& r, ToolCallFormat format) {
  auto gbnf = tool_call_gbnf(r.tools, format);
  if (auto* e = std::get_if<http::ApiError>(&gbnf)) return *e;
  const std::optional<std::string>& text = std::get<std::optional<std::string>>(gbnf);
  if (!text) return std::nullopt;
  if (r.grammar) return refuse("tool_choice", cat("demands a tool call, which ", r.grammar_param, " cannot also constrain: give one of them"));
  Result<grammar::Grammar> g = grammar::parse_gbnf(*text);
  if (!g.ok()) return refuse("tool_choice", cat("cannot be enforced: ", g.message()));
  r.grammar = std::make_shared<const grammar::Grammar>(std::move(g).value());
  r.grammar_param = "tool_choice";
  return std::nullopt;
}

}  // namespace th::server
