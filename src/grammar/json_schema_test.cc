// JSON Schema -> grammar: for each supported keyword, strings that must be
// accepted and rejected; the errors for what is not supported.
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include "grammar/grammar_test_util.h"

namespace mx::grammar {
namespace {

using OJson = nlohmann::ordered_json;

std::shared_ptr<const Grammar> Schema(const std::string& text) {
  auto g = CompileJsonSchema(OJson::parse(text));
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n"
                      << text << "\n"
                      << SchemaToGbnf(OJson::parse(text)).value();
  return g.ok() ? *g : nullptr;
}

std::string SchemaError(const std::string& text) {
  auto g = SchemaToGbnf(OJson::parse(text));
  return g.ok() ? "" : g.status().message();
}

TEST(JsonSchemaTest, PrimitiveTypes) {
  auto s = Schema(R"({"type":"string"})");
  EXPECT_TRUE(Accepts(s, R"("hi \"there\" \u00e9\n")"));
  EXPECT_TRUE(Accepts(s, "\"\xC3\xA9\""));
  EXPECT_FALSE(Accepts(s, "\"a\nb\""));  // raw control character
  EXPECT_FALSE(Accepts(s, R"("\x")"));
  EXPECT_FALSE(Accepts(s, "hi"));
  auto n = Schema(R"({"type":"number"})");
  for (const char* ok : {"0", "-1", "3.25", "1e10", "-0.5E-3", "2e+07"})
    EXPECT_TRUE(Accepts(n, ok)) << ok;
  for (const char* bad : {"01", "1.", ".5", "+1", "1e", "NaN", "1e100"})
    EXPECT_FALSE(Accepts(n, bad)) << bad;
  auto i = Schema(R"({"type":"integer"})");
  EXPECT_TRUE(Accepts(i, "-42"));
  EXPECT_FALSE(Accepts(i, "4.2"));
  auto b = Schema(R"({"type":"boolean"})");
  EXPECT_TRUE(Accepts(b, "true"));
  EXPECT_FALSE(Accepts(b, "True"));
  auto z = Schema(R"({"type":"null"})");
  EXPECT_TRUE(Accepts(z, "null"));
  EXPECT_FALSE(Accepts(z, "nil"));
}

TEST(JsonSchemaTest, ArrayOfTypesAndNullable) {
  auto s = Schema(R"({"type":["integer","null"]})");
  EXPECT_TRUE(Accepts(s, "7"));
  EXPECT_TRUE(Accepts(s, "null"));
  EXPECT_FALSE(Accepts(s, "\"7\""));
  auto n = Schema(R"({"type":"string","nullable":true})");
  EXPECT_TRUE(Accepts(n, "null"));
  EXPECT_TRUE(Accepts(n, "\"x\""));
  EXPECT_FALSE(Accepts(n, "1"));
}

TEST(JsonSchemaTest, EmptySchemaIsAnyValue) {
  auto s = Schema("{}");
  for (const char* ok : {"1", "\"x\"", "[1,{\"a\":[true,null]}]", "{ \"k\" : { } }"}) {
    EXPECT_TRUE(Accepts(s, ok)) << ok;
  }
  EXPECT_FALSE(Accepts(s, "[1,]"));
  EXPECT_FALSE(Accepts(s, "{\"a\"}"));
  EXPECT_TRUE(Accepts(Schema("true"), "[]"));
}

TEST(JsonSchemaTest, PropertiesInSchemaOrderRequiredAndOptional) {
  auto s = Schema(R"({"type":"object","properties":{
      "b":{"type":"integer"},"a":{"type":"string"},"c":{"type":"boolean"}},
      "required":["a"]})");
  EXPECT_TRUE(Accepts(s, R"({"a":"x"})"));
  EXPECT_TRUE(Accepts(s, R"({"b":1,"a":"x"})"));
  EXPECT_TRUE(Accepts(s, R"({"b":1,"a":"x","c":true})"));
  EXPECT_TRUE(Accepts(s, R"({"a":"x","c":false})"));
  EXPECT_FALSE(Accepts(s, R"({"a":"x","b":1})"));  // order of "properties"
  EXPECT_FALSE(Accepts(s, R"({"b":1})"));          // a is required
  EXPECT_FALSE(Accepts(s, R"({})"));
  EXPECT_FALSE(Accepts(s, R"({"a":"x","d":1})"));  // no additional properties by default
  EXPECT_FALSE(Accepts(s, R"({"a":"x",})"));
  EXPECT_FALSE(Accepts(s, R"({"a":1})"));
}

TEST(JsonSchemaTest, AllOptionalAllowsEmptyObject) {
  auto s = Schema(R"({"properties":{"x":{"type":"integer"},"y":{"type":"integer"}}})");
  EXPECT_TRUE(Accepts(s, "{}"));
  EXPECT_TRUE(Accepts(s, R"({"y":2})"));
  EXPECT_TRUE(Accepts(s, R"({"x":1,"y":2})"));
  EXPECT_FALSE(Accepts(s, R"({"y":2,"x":1})"));
}

TEST(JsonSchemaTest, RequiredWithoutPropertiesIsAnyValue) {
  auto s = Schema(R"({"type":"object","required":["id"]})");
  EXPECT_TRUE(Accepts(s, R"({"id":[1]})"));
  EXPECT_FALSE(Accepts(s, R"({})"));
}

TEST(JsonSchemaTest, AdditionalProperties) {
  auto closed = Schema(R"({"type":"object","properties":{"a":{"type":"integer"}},
                           "additionalProperties":false})");
  EXPECT_TRUE(Accepts(closed, R"({"a":1})"));
  EXPECT_FALSE(Accepts(closed, R"({"a":1,"b":2})"));
  auto typed = Schema(R"({"type":"object","properties":{"a":{"type":"integer"}},
                          "additionalProperties":{"type":"string"}})");
  EXPECT_TRUE(Accepts(typed, R"({"a":1,"b":"x","c":"y"})"));
  EXPECT_TRUE(Accepts(typed, R"({"ab":"x"})"));  // a key that only starts like "a"
  EXPECT_TRUE(Accepts(typed, R"({"":"x"})"));
  EXPECT_FALSE(Accepts(typed, R"({"a":1,"b":2})"));
  EXPECT_FALSE(Accepts(typed, R"({"a":"x"})"));  // "a" is declared: its schema applies
  auto map = Schema(R"({"type":"object","additionalProperties":{"type":"integer"}})");
  EXPECT_TRUE(Accepts(map, R"({"x":1,"y":2})"));
  EXPECT_TRUE(Accepts(map, "{}"));
  EXPECT_FALSE(Accepts(map, R"({"x":"1"})"));
  auto any = Schema(R"({"type":"object"})");
  EXPECT_TRUE(Accepts(any, R"({"x":[1,"2"]})"));
  EXPECT_FALSE(Accepts(any, "[]"));
  auto empty = Schema(R"({"type":"object","additionalProperties":false})");
  EXPECT_TRUE(Accepts(empty, "{}"));
  EXPECT_FALSE(Accepts(empty, R"({"x":1})"));
}

TEST(JsonSchemaTest, EnumAndConst) {
  auto e = Schema(R"({"enum":["red","green",3,null,{"a":[1]}]})");
  for (const char* ok : {"\"red\"", "\"green\"", "3", "null", "{\"a\":[1]}"}) {
    EXPECT_TRUE(Accepts(e, ok)) << ok;
  }
  EXPECT_FALSE(Accepts(e, "\"blue\""));
  EXPECT_FALSE(Accepts(e, "\"re\""));
  auto typed = Schema(R"({"type":"string","enum":["a",1]})");
  EXPECT_TRUE(Accepts(typed, "\"a\""));
  EXPECT_FALSE(Accepts(typed, "1"));
  auto c = Schema(R"({"const":"fixed \"q\""})");
  EXPECT_TRUE(Accepts(c, R"("fixed \"q\"")"));
  EXPECT_FALSE(Accepts(c, R"("fixed")"));
}

TEST(JsonSchemaTest, ArrayItemsAndCounts) {
  auto s = Schema(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})");
  EXPECT_TRUE(Accepts(s, "[1]"));
  EXPECT_TRUE(Accepts(s, "[1, 2, 3]"));
  EXPECT_FALSE(Accepts(s, "[]"));
  EXPECT_FALSE(Accepts(s, "[1,2,3,4]"));
  EXPECT_FALSE(Accepts(s, "[\"1\"]"));
  auto any = Schema(R"({"type":"array"})");
  EXPECT_TRUE(Accepts(any, "[]"));
  EXPECT_TRUE(Accepts(any, "[1,\"a\",[]]"));
  auto min2 = Schema(R"({"items":{"type":"boolean"},"minItems":2})");
  EXPECT_FALSE(Accepts(min2, "[true]"));
  EXPECT_TRUE(Accepts(min2, "[true,false,true,true]"));
  auto none = Schema(R"({"type":"array","items":false})");
  EXPECT_TRUE(Accepts(none, "[]"));
  EXPECT_FALSE(Accepts(none, "[1]"));
}

TEST(JsonSchemaTest, PrefixItems) {
  auto t = Schema(R"({"prefixItems":[{"type":"string"},{"type":"integer"}]})");
  EXPECT_TRUE(Accepts(t, R"(["a",1])"));
  EXPECT_FALSE(Accepts(t, R"(["a"])"));
  EXPECT_FALSE(Accepts(t, R"(["a",1,2])"));
  auto more =
      Schema(R"({"prefixItems":[{"type":"string"}],"items":{"type":"integer"},"maxItems":3})");
  EXPECT_TRUE(Accepts(more, R"(["a"])"));
  EXPECT_TRUE(Accepts(more, R"(["a",1,2])"));
  EXPECT_FALSE(Accepts(more, R"(["a",1,2,3])"));
  EXPECT_FALSE(Accepts(more, R"([1])"));
}

TEST(JsonSchemaTest, StringLengths) {
  auto s = Schema(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_TRUE(Accepts(s, "\"ab\""));
  EXPECT_TRUE(Accepts(s, "\"a\\nb\""));  // an escape is one character
  EXPECT_TRUE(Accepts(s, "\"\xC3\xA9\xC3\xA9\xC3\xA9\""));
  EXPECT_FALSE(Accepts(s, "\"a\""));
  EXPECT_FALSE(Accepts(s, "\"abcd\""));
  auto min = Schema(R"({"minLength":1})");
  EXPECT_FALSE(Accepts(min, "\"\""));
  EXPECT_TRUE(Accepts(min, "\"abcdefghijklmnop\""));
}

TEST(JsonSchemaTest, Formats) {
  auto d = Schema(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(Accepts(d, "\"2026-12-01\""));
  EXPECT_FALSE(Accepts(d, "\"2026-13-01\""));
  EXPECT_FALSE(Accepts(d, "\"2026-12-1\""));
  auto t = Schema(R"({"type":"string","format":"time"})");
  EXPECT_TRUE(Accepts(t, "\"23:59:07Z\""));
  EXPECT_TRUE(Accepts(t, "\"08:00:00.250+02:00\""));
  EXPECT_FALSE(Accepts(t, "\"24:00:00Z\""));
  EXPECT_FALSE(Accepts(t, "\"12:00:00\""));  // RFC 3339 needs the offset
  auto dt = Schema(R"({"type":"string","format":"date-time"})");
  EXPECT_TRUE(Accepts(dt, "\"2026-12-01T10:20:30Z\""));
  EXPECT_FALSE(Accepts(dt, "\"2026-12-01 10:20:30Z\""));
  auto u = Schema(R"({"type":"string","format":"uuid"})");
  EXPECT_TRUE(Accepts(u, "\"123e4567-e89b-12d3-a456-426614174000\""));
  EXPECT_FALSE(Accepts(u, "\"123e4567e89b12d3a456426614174000\""));
  EXPECT_EQ(SchemaError(R"({"type":"string","format":"email"})"),
            "json schema at /format: unsupported format 'email' (supported: date, time, "
            "date-time, uuid)");
}

struct IntCase {
  const char* schema;
  int64_t lo, hi;  // inclusive
};

TEST(JsonSchemaTest, IntegerBoundsExhaustively) {
  const IntCase cases[] = {
      {R"({"type":"integer","minimum":0})", 0, INT64_MAX},
      {R"({"type":"integer","minimum":-7,"maximum":1234})", -7, 1234},
      {R"({"type":"integer","minimum":15,"maximum":907})", 15, 907},
      {R"({"type":"integer","exclusiveMinimum":-100,"exclusiveMaximum":-3})", -99, -4},
      {R"({"type":"integer","maximum":-12})", INT64_MIN, -12},
      {R"({"type":"integer","maximum":99})", INT64_MIN, 99},
      {R"({"type":"integer","minimum":1.5,"maximum":10.5})", 2, 10},
      {R"({"type":"integer","minimum":5,"maximum":5})", 5, 5},
      {R"({"type":"integer","minimum":3,"exclusiveMinimum":true})", 4, INT64_MAX},
  };
  for (const IntCase& c : cases) {
    auto g = Schema(c.schema);
    for (int64_t v = -1100; v <= 1300; ++v) {
      ASSERT_EQ(Accepts(g, std::to_string(v)), v >= c.lo && v <= c.hi) << c.schema << " " << v;
    }
    EXPECT_FALSE(Accepts(g, "007"));
  }
  auto big = Schema(R"({"type":"integer","minimum":1000000})");
  EXPECT_TRUE(Accepts(big, "1000000"));
  EXPECT_TRUE(Accepts(big, "99999999999"));
  EXPECT_FALSE(Accepts(big, "999999"));
  EXPECT_EQ(SchemaError(R"({"type":"integer","minimum":5,"maximum":4})"),
            "json schema at /: the minimum and maximum leave no value");
}

TEST(JsonSchemaTest, NumberBounds) {
  auto g = Schema(R"({"type":"number","minimum":-2,"exclusiveMaximum":10})");
  for (const char* ok : {"-2", "-2.0", "-1.999", "0", "9.99", "3", "-0.5"}) {
    EXPECT_TRUE(Accepts(g, ok)) << ok;
  }
  for (const char* bad : {"-2.01", "10", "10.0", "11", "-3", "1e2"})
    EXPECT_FALSE(Accepts(g, bad)) << bad;
  auto pos = Schema(R"({"type":"number","exclusiveMinimum":0})");
  EXPECT_TRUE(Accepts(pos, "0.001"));
  EXPECT_TRUE(Accepts(pos, "12"));
  EXPECT_FALSE(Accepts(pos, "0"));
  EXPECT_FALSE(Accepts(pos, "0.000"));
  EXPECT_FALSE(Accepts(pos, "-1"));
  EXPECT_NE(SchemaError(R"({"type":"number","minimum":0.5})")
                .find("at /minimum: value 0.5: bounds on a 'number' must be whole numbers"),
            std::string::npos);
}

TEST(JsonSchemaTest, AnyOfAndOneOf) {
  auto s = Schema(R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})");
  EXPECT_TRUE(Accepts(s, "5"));
  EXPECT_TRUE(Accepts(s, "\"a\""));
  EXPECT_FALSE(Accepts(s, "\"ab\""));
  auto o = Schema(R"({"oneOf":[{"const":1},{"const":2}]})");
  EXPECT_TRUE(Accepts(o, "2"));
  EXPECT_FALSE(Accepts(o, "3"));
}

TEST(JsonSchemaTest, AllOfMergesObjects) {
  auto s = Schema(R"({"$defs":{"base":{"type":"object","properties":{"id":{"type":"integer"}},
      "required":["id"]}},
      "allOf":[{"$ref":"#/$defs/base"},{"properties":{"name":{"type":"string"}},"required":["name"]}]})");
  EXPECT_TRUE(Accepts(s, R"({"id":1,"name":"x"})"));
  EXPECT_FALSE(Accepts(s, R"({"id":1})"));
  EXPECT_FALSE(Accepts(s, R"({"name":"x"})"));
  EXPECT_NE(
      SchemaError(R"({"allOf":[{"type":"string"}]})").find("allOf is supported only for object"),
      std::string::npos);
}

TEST(JsonSchemaTest, RefsIncludingRecursion) {
  auto s = Schema(R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object",
      "properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},
      "required":["v"]}}})");
  EXPECT_TRUE(Accepts(s, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4}]}]})"));
  EXPECT_FALSE(Accepts(s, R"({"v":1,"kids":[{"kids":[]}]})"));
  auto d = Schema(R"({"definitions":{"n":{"type":"integer"}},"items":{"$ref":"#/definitions/n"}})");
  EXPECT_TRUE(Accepts(d, "[1,2]"));
  EXPECT_FALSE(Accepts(d, "[1.5]"));
  EXPECT_EQ(SchemaError(R"({"$ref":"#/$defs/missing"})"),
            "json schema at /$ref: reference '#/$defs/missing' does not resolve");
  EXPECT_NE(SchemaError(R"({"$ref":"http://x/s.json"})").find("only local references"),
            std::string::npos);
}

TEST(JsonSchemaTest, JsonObjectMode) {
  auto g = CompileJsonObject().value();
  EXPECT_TRUE(Accepts(g, R"({"a":[1,{"b":null}]})"));
  EXPECT_TRUE(Accepts(g, "{}"));
  EXPECT_FALSE(Accepts(g, "[]"));
  EXPECT_FALSE(Accepts(g, "\"x\""));
}

TEST(JsonSchemaTest, WhitespaceIsBounded) {
  auto g = Schema(R"({"type":"object","properties":{"a":{"type":"integer"}}})");
  EXPECT_TRUE(Accepts(g, "{\n  \"a\": 1\n}"));
  EXPECT_TRUE(Accepts(g, "{ \"a\" : 1 }"));
  EXPECT_TRUE(Accepts(g, "{\n" + std::string(20, ' ') + "\"a\":1}"));
  EXPECT_FALSE(Accepts(g, "{\n" + std::string(21, ' ') + "\"a\":1}"));
  EXPECT_FALSE(Accepts(g, "{  \"a\":1}"));
  EXPECT_FALSE(Accepts(g, " {\"a\":1}"));  // nothing before the value
  EXPECT_FALSE(Accepts(g, "{\"a\":1} "));  // or after it
}

TEST(JsonSchemaTest, UnsupportedKeywordsNameThePath) {
  EXPECT_EQ(
      SchemaError(R"({"type":"object","properties":{"name":{"type":"string","pattern":"^a"}}})"),
      "json schema at /properties/name: unsupported keyword 'pattern'");
  EXPECT_EQ(SchemaError(R"({"not":{}})"), "json schema at /: unsupported keyword 'not'");
  EXPECT_EQ(SchemaError(R"({"items":{"if":{}}})"),
            "json schema at /items: unsupported keyword 'if'");
  EXPECT_EQ(SchemaError(R"({"anyOf":[{"type":"string"}],"properties":{}})"),
            "json schema at /: keyword 'properties' beside 'anyOf' is not supported");
  EXPECT_EQ(SchemaError("false"), "json schema at /: the schema 'false' matches nothing");
  EXPECT_EQ(SchemaError(R"({"type":"strin"})"), "json schema at /type: unknown type 'strin'");
  EXPECT_EQ(SchemaError(R"({"type":"string","maxLength":-1})"),
            "json schema at /maxLength: must be a non-negative integer");
}

TEST(JsonSchemaTest, AnnotationsAreIgnored) {
  auto g = Schema(R"({"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x",
      "title":"T","description":"D","examples":[1],"default":2,"$comment":"c","type":"integer"})");
  EXPECT_TRUE(Accepts(g, "1"));
}

TEST(JsonSchemaTest, AppendSchemaRulesEmbedsSeveralSchemas) {
  std::string gbnf = "root ::= tool-0 | tool-1\n";
  ASSERT_TRUE(AppendSchemaRules(OJson::parse(R"({"type":"integer"})"), "tool-0", &gbnf).ok());
  ASSERT_TRUE(
      AppendSchemaRules(OJson::parse(R"({"type":"object","properties":{"q":{"type":"string"}}})"),
                        "tool-1", &gbnf)
          .ok());
  auto g = MustParse(gbnf);
  EXPECT_TRUE(Accepts(g, "12"));
  EXPECT_TRUE(Accepts(g, R"({"q":"x"})"));
  EXPECT_FALSE(Accepts(g, "\"x\""));
  std::string untouched = "x";
  EXPECT_FALSE(AppendSchemaRules(OJson::parse("{}"), "bad_name", &untouched).ok());
  EXPECT_FALSE(AppendSchemaRules(OJson::parse(R"({"pattern":"x"})"), "ok", &untouched).ok());
  EXPECT_EQ(untouched, "x");
}

TEST(JsonSchemaTest, PlainJsonSortsPropertiesOrderedJsonKeepsThem) {
  const char* text =
      R"({"properties":{"b":{"type":"integer"},"a":{"type":"integer"}},"required":["a","b"]})";
  auto ordered = CompileJsonSchema(OJson::parse(text)).value();
  auto sorted = CompileJsonSchema(nlohmann::json::parse(text)).value();
  EXPECT_TRUE(Accepts(ordered, R"({"b":1,"a":2})"));
  EXPECT_TRUE(Accepts(sorted, R"({"a":2,"b":1})"));
  EXPECT_FALSE(Accepts(sorted, R"({"b":1,"a":2})"));
}

}  // namespace
}  // namespace mx::grammar
