// JSON schemas (OpenAI's response_format json_schema, llama-server's
// json_schema, vLLM's guided_json) as GBNF. Supported: type (one or a list),
// properties, required, additionalProperties (false when absent in strict
// mode, as OpenAI's strict mode requires; true otherwise, as JSON Schema
// says), enum, const, items, minItems, maxItems, anyOf, oneOf (as anyOf: the
// grammar cannot forbid a value matching two branches), $ref to #/$defs/..
// or #/definitions/.., string pattern (regex_grammar.h's subset), minLength,
// maxLength; annotations (title, description, default, examples, $schema,
// $id, $comment) are ignored. Any other keyword is refused by name, so no
// constraint is silently dropped. Properties come in the schema's order.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace th::grammar {

struct SchemaOptions {
  bool strict = false;  // additionalProperties false unless the schema says otherwise
  int max_depth = 32;   // nested schemas
  std::string root = "root";  // the rule the schema's value is; another name lets a caller wrap it
};

/// @brief GBNF text whose root matches exactly the JSON texts the compiler admits for
/// `schema` (without whitespace around the value), or one line naming the problem and
/// where ("at /properties/age: unsupported keyword 'minimum'").
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, const SchemaOptions& options = {});

/// @brief GBNF text whose root matches any JSON object (response_format json_object).
std::string json_object_gbnf();

}  // namespace th::grammar
