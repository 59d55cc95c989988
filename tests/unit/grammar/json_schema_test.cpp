#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include "unit/grammar/grammar_test_util.h"

namespace th::grammar {
namespace {

using Json = nlohmann::ordered_json;
using test::compile;
using test::matches;

std::shared_ptr<const Grammar> schema(const char* text, bool strict = false) {
  SchemaOptions o;
  o.strict = strict;
  Result<std::string> gbnf = json_schema_to_gbnf(Json::parse(text), o);
  EXPECT_TRUE(gbnf.ok()) << gbnf.message();
  return gbnf.ok() ? compile(*gbnf) : nullptr;
}

std::string schema_error(const char* text, bool strict = false) {
  SchemaOptions o;
  o.strict = strict;
  Result<std::string> gbnf = json_schema_to_gbnf(Json::parse(text), o);
  if (!gbnf.ok()) return gbnf.message();
  Result<Grammar> g = parse_gbnf(*gbnf);
  return g.ok() ? std::string("(compiled)") : "gbnf: " + g.message();
}

TEST(JsonSchema, ObjectPropertiesRequiredAndOrder) {
  auto g = schema(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
                     "ok":{"type":"boolean"}},"required":["name"],"additionalProperties":false})");
  EXPECT_TRUE(matches(g, R"({"name":"Bob"})"));
  EXPECT_TRUE(matches(g, R"({ "name" : "Bob", "age": -12, "ok": true })"));
  EXPECT_TRUE(matches(g, R"({"name":"B\u00e9\n","ok":false})"));
  EXPECT_FALSE(matches(g, R"({"age":1})"));                     // name is required
  EXPECT_FALSE(matches(g, R"({"name":"Bob","age":1.5})"));      // an integer
  EXPECT_FALSE(matches(g, R"({"name":"Bob","x":1})"));          // no additional properties
  EXPECT_FALSE(matches(g, R"({"name":"Bob",})"));
  EXPECT_FALSE(matches(g, R"({"age":1,"name":"Bob"})"));        // the schema's order
  EXPECT_FALSE(matches(g, R"({"name":"a\"})"));
  EXPECT_FALSE(matches(g, "{\"name\":\"a\x01\"}"));             // control characters are escaped in JSON
  EXPECT_FALSE(matches(g, R"({"name":"\ud800"})"));            // no lone surrogate escapes
}

TEST(JsonSchema, StrictModeForbidsAdditionalPropertiesByDefault) {
  const char* s = R"({"type":"object","properties":{"a":{"type":"null"}},"required":["a"]})";
  EXPECT_TRUE(matches(schema(s, false), R"({"a":null,"b":[1,{"c":"d"}]})"));
  EXPECT_FALSE(matches(schema(s, true), R"({"a":null,"b":1})"));
  EXPECT_TRUE(matches(schema(s, true), R"({"a":null})"));
  auto typed = schema(R"({"type":"object","additionalProperties":{"type":"number"}})", true);
  EXPECT_TRUE(matches(typed, R"({"x":1e5,"y":-0.25})"));
  EXPECT_FALSE(matches(typed, R"({"x":"1"})"));
  EXPECT_TRUE(matches(typed, "{}"));
}

TEST(JsonSchema, EnumConstArraysAndNesting) {
  auto g = schema(R"({"type":"object","properties":{
      "color":{"enum":["red","green",3,null]},
      "v":{"const":{"k":[1,"x"]}},
      "tags":{"type":"array","items":{"type":"string","maxLength":3},"minItems":1,"maxItems":2},
      "inner":{"type":"object","properties":{"z":{"type":["integer","null"]}},"required":["z"]}},
    "required":["color","v","tags","inner"]})", true);
  EXPECT_TRUE(matches(g, R"({"color":"red","v":{"k":[1,"x"]},"tags":["a"],"inner":{"z":null}})"));
  EXPECT_TRUE(matches(g, R"({"color":3,"v":{"k":[1,"x"]},"tags":["abc", ""],"inner":{"z":7}})"));
  EXPECT_FALSE(matches(g, R"({"color":"blue","v":{"k":[1,"x"]},"tags":["a"],"inner":{"z":7}})"));
  EXPECT_FALSE(matches(g, R"({"color":3,"v":{"k":[1]},"tags":["a"],"inner":{"z":7}})"));
  EXPECT_FALSE(matches(g, R"({"color":3,"v":{"k":[1,"x"]},"tags":[],"inner":{"z":7}})"));
  EXPECT_FALSE(matches(g, R"({"color":3,"v":{"k":[1,"x"]},"tags":["a","b","c"],"inner":{"z":7}})"));
  EXPECT_FALSE(matches(g, R"({"color":3,"v":{"k":[1,"x"]},"tags":["abcd"],"inner":{"z":7}})"));
  EXPECT_FALSE(matches(g, R"({"color":3,"v":{"k":[1,"x"]},"tags":["a"],"inner":{}})"));
}

TEST(JsonSchema, AnyOfRefsAndRecursion) {
  auto g = schema(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
      "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},
    "$ref":"#/$defs/node"})", true);
  EXPECT_TRUE(matches(g, R"({"v":1,"next":{"v":2,"next":null}})"));
  EXPECT_FALSE(matches(g, R"({"v":1,"next":{"v":2}})"));
  auto any = schema(R"({"oneOf":[{"type":"string","minLength":2},{"type":"number"}]})");
  EXPECT_TRUE(matches(any, R"("ab")"));
  EXPECT_TRUE(matches(any, "0.5"));
  EXPECT_FALSE(matches(any, R"("a")"));
  EXPECT_FALSE(matches(any, "true"));
  EXPECT_FALSE(matches(any, "01"));
}

TEST(JsonSchema, StringPatterns) {
  auto anchored = schema(R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"})");
  EXPECT_TRUE(matches(anchored, R"("AB-123")"));
  EXPECT_FALSE(matches(anchored, R"("AB-12")"));
  EXPECT_FALSE(matches(anchored, R"("xAB-123")"));
  auto search = schema(R"({"type":"string","pattern":"ab"})");  // JSON Schema searches
  EXPECT_TRUE(matches(search, R"("xxaby")"));
  EXPECT_FALSE(matches(search, R"("xxa")"));
  auto quote = schema(R"({"type":"string","pattern":"^a\"[\\\\b]$"})");
  EXPECT_TRUE(matches(quote, R"("a\"\\")"));
  EXPECT_TRUE(matches(quote, R"("a\"b")"));
  EXPECT_FALSE(matches(quote, R"("a"b")"));
}

TEST(JsonSchema, AnyJsonObject) {
  auto g = compile(json_object_gbnf());
  EXPECT_TRUE(matches(g, R"({"a":[1,2.5e-3,true,false,null,{"b":{}}],"c":"d"})"));
  EXPECT_TRUE(matches(g, "{}"));
  EXPECT_FALSE(matches(g, "[]"));
  EXPECT_FALSE(matches(g, R"({"a":01})"));
  EXPECT_FALSE(matches(g, R"({"a":1,})"));
  EXPECT_FALSE(matches(g, R"({a:1})"));
}

TEST(JsonSchema, UnsupportedOrBadSchemasAreNamed) {
  struct Case {
    const char* schema;
    const char* message;
  };
  const Case cases[] = {
      {R"({"type":"integer","minimum":0})", "at /: unsupported keyword 'minimum'"},
      {R"({"properties":{"d":{"type":"string","format":"date"}}})", "at /properties/d: unsupported keyword 'format'"},
      {R"({"type":"strnig"})", "unknown type 'strnig'"},
      {R"({"$ref":"#/$defs/missing"})", "'#/$defs/missing' is not defined"},
      {R"({"$ref":"http://example.com/s"})", "only references into #/$defs/"},
      {R"({"type":"object","properties":{},"required":["x"]})", "'x' is not among the properties"},
      {R"({"type":"array","minItems":3,"maxItems":2})", "maxItems is below minItems"},
      {R"({"type":"array","maxItems":100000})", "from 0 to 1000"},
      {R"({"enum":[]})", "must be a non-empty array"},
      {R"({"type":"string","pattern":"(a"})", "at /pattern: regex at offset"},
      {R"j({"type":"string","pattern":"(?=a)"})j", "lookaround"},
      {R"(false)", "matches nothing"},
      {R"(3)", "must be an object or a boolean"},
  };
  for (const Case& c : cases) {
    const std::string e = schema_error(c.schema);
    EXPECT_NE(e.find(c.message), std::string::npos) << c.schema << " -> " << e;
  }
  std::string nested;
  for (int i = 0; i < 40; ++i) nested += R"({"type":"array","items":)";
  nested += "{}" + std::string(40, '}');
  EXPECT_NE(schema_error(nested.c_str()).find("nest deeper"), std::string::npos);
}

}  // namespace
}  // namespace th::grammar
