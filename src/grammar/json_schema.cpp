#include "grammar/json_schema.h"

#include <map>
#include <set>
#include <string_view>
#include <vector>

#include "grammar/gbnf_text.h"
#include "grammar/regex_grammar.h"

namespace th::grammar {

namespace {

using Json = nlohmann::ordered_json;

// The JSON pieces every schema's grammar stands on. Whitespace is bounded (8) and numbers
// have at most 16 digits before and after the point and 2 in the exponent, so that a value
// whose strings are bounded has a bounded length (and a double parses it exactly enough).
// \u escapes of surrogates are left out: a validator counts a pair as one character.
constexpr std::string_view kPrimitives = R"(ws ::= [ \t\n]{0,8}
json-char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))
json-string ::= "\"" json-char* "\""
json-integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
json-number ::= json-integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?
json-boolean ::= "true" | "false"
json-null ::= "null"
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-member ::= json-string ws ":" ws json-value
json-object ::= "{" ws (json-member ws ("," ws json-member ws)*)? "}"
json-array ::= "[" ws (json-value ws ("," ws json-value ws)*)? "]"
)";

const std::set<std::string_view> kAnnotations = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
                                                 "$defs", "definitions"};

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const SchemaOptions& o) : root_(root), o_(o) {}

  Result<std::string> compile() {
    TH_ASSIGN_OR_RETURN(std::string r, value(root_, "", 0));
    std::string out(kPrimitives);
    out += o_.root + " ::= " + r + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  Status fail(const std::string& at, const std::string& why) const {
    return Status::errorf("at ", at.empty() ? "/" : at, ": ", why);
  }

  // A new rule named after the schema's place, holding `body`; returns its name.
  std::string add_rule(const std::string& body) {
    const std::string name = "s" + std::to_string(rules_.size());
    rules_.emplace(name, body);
    return name;
  }

  Result<std::string> value(const Json& s, const std::string& at, int depth) {
    if (depth > o_.max_depth) return fail(at, cat("schemas nest deeper than ", o_.max_depth));
    if (s.is_boolean()) {
      if (s.get<bool>()) return std::string("json-value");
      return fail(at, "the schema false matches nothing");
    }
    if (!s.is_object()) return fail(at, "a schema must be an object or a boolean");
    static const std::set<std::string_view> kKnown = {"type", "properties", "required", "additionalProperties", "enum",
                                                      "const", "items", "minItems", "maxItems", "anyOf", "oneOf", "$ref",
                                                      "pattern", "minLength", "maxLength"};
    for (const auto& [k, v] : s.items())
      if (!kKnown.count(k) && !kAnnotations.count(k)) return fail(at, cat("unsupported keyword '", k, "'"));
    if (auto r = s.find("$ref"); r != s.end()) return ref(*r, at, depth);
    if (auto c = s.find("const"); c != s.end()) return gbnf_literal(c->dump(-1, ' ', false, Json::error_handler_t::replace));
    if (auto e = s.find("enum"); e != s.end()) {
      if (!e->is_array() || e->empty()) return fail(at + "/enum", "must be a non-empty array");
      std::string out = "(";
      for (size_t k = 0; k < e->size(); ++k) out += (k ? " | " : "") + gbnf_literal((*e)[k].dump(-1, ' ', false, Json::error_handler_t::replace));
      return out + ")";
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      auto a = s.find(key);
      if (a == s.end()) continue;
      if (!a->is_array() || a->empty()) return fail(at + "/" + key, "must be a non-empty array");
      std::string out = "(";
      for (size_t k = 0; k < a->size(); ++k) {
        TH_ASSIGN_OR_RETURN(std::string r, value((*a)[k], cat(at, "/", key, "/", k), depth + 1));
        out += (k ? " | " : "") + r;
      }
      return out + ")";
    }
    return typed(s, at, depth);
  }

  Result<std::string> ref(const Json& r, const std::string& at, int depth) {
    if (!r.is_string()) return fail(at + "/$ref", "must be a string");
    const std::string& path = r.get_ref<const std::string&>();
    for (std::string_view prefix : {"#/$defs/", "#/definitions/"}) {
      if (path.rfind(prefix, 0) != 0) continue;
      const std::string name = path.substr(prefix.size());
      const Json& defs = root_.value(std::string(prefix.substr(2, prefix.size() - 3)), Json::object());
      if (!defs.is_object() || !defs.contains(name)) return fail(at + "/$ref", cat("'", path, "' is not defined"));
      if (auto done = refs_.find(path); done != refs_.end()) return done->second;
      const std::string rule = "ref" + std::to_string(refs_.size());
      refs_.emplace(path, rule);  // before compiling it: a recursive reference finds it
      TH_ASSIGN_OR_RETURN(std::string body, value(defs[name], path.substr(1), depth + 1));
      rules_.emplace(rule, body);
      return rule;
    }
    return fail(at + "/$ref", "only references into #/$defs/ or #/definitions/ are supported");
  }

  Result<std::string> typed(const Json& s, const std::string& at, int depth) {
    std::vector<std::string> types;
    if (auto t = s.find("type"); t != s.end()) {
      if (t->is_string()) types.push_back(t->get<std::string>());
      else if (t->is_array())
        for (const Json& x : *t) types.push_back(x.is_string() ? x.get<std::string>() : std::string("?"));
      if (types.empty()) return fail(at + "/type", "must be a type name or a non-empty array of them");
    } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
      types = {"object"};
    } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
      types = {"array"};
    } else if (s.contains("pattern") || s.contains("minLength") || s.contains("maxLength")) {
      types = {"string"};
    } else {
      return std::string("json-value");
    }
    std::string out = "(";
    for (size_t k = 0; k < types.size(); ++k) {
      std::string r;
      const std::string& t = types[k];
      if (t == "object") {
        TH_ASSIGN_OR_RETURN(r, object(s, at, depth));
      } else if (t == "array") {
        TH_ASSIGN_OR_RETURN(r, array(s, at, depth));
      } else if (t == "string") {
        TH_ASSIGN_OR_RETURN(r, string(s, at));
      } else if (t == "number" || t == "integer" || t == "boolean" || t == "null") {
        r = "json-" + t;
      } else {
        return fail(at + "/type", cat("unknown type '", t, "'"));
      }
      out += (k ? " | " : "") + r;
    }
    return out + ")";
  }

  Result<int> count(const Json& s, const char* key, const std::string& at, int otherwise) {
    auto it = s.find(key);
    if (it == s.end()) return otherwise;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 1000)
      return fail(at + "/" + key, "must be an integer from 0 to 1000 (the grammar's largest repetition)");
    return static_cast<int>(it->get<int64_t>());
  }

  static std::string bounds(int min, int max) {
    return max < 0 ? cat("{", min, ",}") : cat("{", min, ",", max, "}");
  }

  Result<std::string> string(const Json& s, const std::string& at) {
    TH_ASSIGN_OR_RETURN(int min, count(s, "minLength", at, 0));
    TH_ASSIGN_OR_RETURN(int max, count(s, "maxLength", at, -1));
    if (max >= 0 && max < min) return fail(at, "maxLength is below minLength");
    auto p = s.find("pattern");
    if (p == s.end()) return add_rule("\"\\\"\" json-char" + bounds(min, max) + " \"\\\"\"");
    if (!p->is_string()) return fail(at + "/pattern", "must be a string");
    if (s.contains("minLength") || s.contains("maxLength"))
      return fail(at, "pattern together with minLength or maxLength is not supported");
    bool start = false, end = false;
    RegexOptions ro;
    ro.json_string = true;
    Result<std::string> re = regex_to_gbnf(p->get_ref<const std::string&>(), ro, &start, &end);
    if (!re.ok()) return fail(at + "/pattern", re.message());
    // A schema's pattern searches the string: an end without an anchor may have more around it.
    return add_rule(cat("\"\\\"\" ", start ? "" : "json-char* ", *re, end ? "" : " json-char*", " \"\\\"\""));
  }

  Result<std::string> array(const Json& s, const std::string& at, int depth) {
    std::string item = "json-value";
    if (auto it = s.find("items"); it != s.end()) {
      TH_ASSIGN_OR_RETURN(item, value(*it, at + "/items", depth + 1));
    }
    TH_ASSIGN_OR_RETURN(int min, count(s, "minItems", at, 0));
    TH_ASSIGN_OR_RETURN(int max, count(s, "maxItems", at, -1));
    if (max >= 0 && max < min) return fail(at, "maxItems is below minItems");
    if (max == 0) return add_rule("\"[\" ws \"]\"");
    const std::string more = "(\",\" ws " + item + " ws)" + bounds(min > 0 ? min - 1 : 0, max < 0 ? -1 : max - 1);
    const std::string items = item + " ws " + more;
    return add_rule("\"[\" ws " + (min > 0 ? items : "(" + items + ")?") + " \"]\"");
  }

  Result<std::string> object(const Json& s, const std::string& at, int depth);

  const Json& root_;
  SchemaOptions o_;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> refs_;
};

// Properties in the schema's order, each required one present, each optional one present
// or not, commas only between members: first(i) is the members from i on when none came
// before, rest(i) the same after one did (so each member it emits starts with a comma).
Result<std::string> SchemaCompiler::object(const Json& s, const std::string& at, int depth) {
  const Json empty = Json::object();
  const Json* props = &empty;
  if (auto p = s.find("properties"); p != s.end()) {
    if (!p->is_object()) return fail(at + "/properties", "must be an object");
    props = &*p;
  }
  std::set<std::string> required;
  if (auto r = s.find("required"); r != s.end()) {
    if (!r->is_array()) return fail(at + "/required", "must be an array of property names");
    for (const Json& n : *r) {
      if (!n.is_string()) return fail(at + "/required", "must be an array of property names");
      if (!props->contains(n.get<std::string>()))
        return fail(at + "/required", cat("'", n.get<std::string>(), "' is not among the properties"));
      required.insert(n.get<std::string>());
    }
  }
  std::string extra;  // the rule of an additional member's value; empty: none allowed
  auto ap = s.find("additionalProperties");
  if (ap == s.end()) {
    if (!o_.strict) extra = "json-value";
  } else if (ap->is_object() || (ap->is_boolean() && ap->get<bool>())) {
    TH_ASSIGN_OR_RETURN(extra, value(*ap, at + "/additionalProperties", depth + 1));
  } else if (!ap->is_boolean()) {
    return fail(at + "/additionalProperties", "must be a boolean or a schema");
  }
  std::vector<std::string> members;
  std::vector<bool> needed;
  for (const auto& [name, sub] : props->items()) {
    TH_ASSIGN_OR_RETURN(std::string v, value(sub, at + "/properties/" + name, depth + 1));
    members.push_back(gbnf_literal(Json(name).dump(-1, ' ', false, Json::error_handler_t::replace)) + " ws \":\" ws " + v);
    needed.push_back(required.count(name) > 0);
  }
  // The tail after the declared members: additional ones, if allowed.
  std::string first_tail = "\"\"", rest_tail = "\"\"";
  if (!extra.empty()) {
    const std::string kv = add_rule("json-string ws \":\" ws " + extra + " ws");
    rest_tail = "(\",\" ws " + kv + ")*";
    first_tail = "(" + kv + " " + rest_tail + ")?";
  }
  std::string first = first_tail, rest = rest_tail;
  for (size_t k = members.size(); k-- > 0;) {
    const std::string m = members[k] + " ws";
    const std::string new_rest = needed[k] ? "\",\" ws " + m + " " + rest : "(\",\" ws " + m + ")? " + rest;
    const std::string new_first = needed[k] ? m + " " + rest : "(" + m + " " + rest + " | " + first + ")";
    rest = add_rule(new_rest);
    first = add_rule(new_first);
  }
  return add_rule("\"{\" ws " + first + " \"}\"");
}

}  // namespace

Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, const SchemaOptions& options) {
  Result<std::string> r = SchemaCompiler(schema, options).compile();
  if (!r.ok()) return printable(r.status());
  return r;
}

std::string json_object_gbnf() { return std::string(kPrimitives) + "root ::= json-object\n"; }

}  // namespace th::grammar
