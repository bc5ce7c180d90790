// Hostile grammars and schemas: every limit fails cleanly with an error
// that names it; random text never crashes the parser or the converter.
#include <gtest/gtest.h>

#include <random>

#include "grammar/grammar_test_util.h"
#include "grammar/json_schema.h"

namespace mx::grammar {
namespace {

using OJson = nlohmann::ordered_json;

TEST(GrammarHostileTest, TextSizeLimit) {
  GbnfLimits limits;
  limits.max_text_bytes = 16;
  EXPECT_EQ(ParseError("root ::= \"0123456789\"", limits),
            "grammar: text of 21 bytes exceeds the limit of 16 (GbnfLimits::max_text_bytes)");
}

TEST(GrammarHostileTest, RuleCountLimit) {
  GbnfLimits limits;
  limits.max_rules = 3;
  EXPECT_NE(ParseError("root ::= a b c\na ::= \"a\"\nb ::= \"b\"\nc ::= \"c\"", limits)
                .find("more than 3 rules (GbnfLimits::max_rules)"),
            std::string::npos);
  // Repetitions make rules too.
  EXPECT_NE(ParseError("root ::= \"a\"{0,10}", limits).find("GbnfLimits::max_rules"),
            std::string::npos);
}

TEST(GrammarHostileTest, NestingLimit) {
  std::string deep = "root ::= " + std::string(65, '(') + "\"x\"" + std::string(65, ')');
  EXPECT_EQ(ParseError(deep),
            "grammar line 1:74: groups nested deeper than 64 levels (GbnfLimits::max_nesting)");
  std::string ok = "root ::= " + std::string(64, '(') + "\"x\"" + std::string(64, ')');
  EXPECT_EQ(ParseError(ok), "");
}

TEST(GrammarHostileTest, RepetitionCountLimit) {
  EXPECT_EQ(ParseError("root ::= \"a\"{0,65537}"),
            "grammar line 1:13: repetition {0,65537} exceeds the limit of 65536 "
            "(GbnfLimits::max_repetition)");
  EXPECT_EQ(ParseError("root ::= \"a\"{99999999999999}"),
            "grammar line 1:13: repetition count too large");
}

TEST(GrammarHostileTest, ExpandedSizeLimit) {
  std::string g = "root ::= r0";
  for (int i = 0; i < 40; ++i) g += "\nr" + std::to_string(i) + " ::= [a]{65536}";
  EXPECT_NE(ParseError(g).find("elements once repetitions are expanded (GbnfLimits::max_elements)"),
            std::string::npos);
}

TEST(GrammarHostileTest, NestedRepetitionsParseCheaplyAndFailCleanlyInTheMatcher) {
  // Groups are repeated by reference, so this is thousands of elements, not
  // 10^12; but its start is a closure over 10^8 empty repetitions, which the
  // matcher refuses instead of walking.
  auto g = MustParse(R"(root ::= ((("ab"){0,10000}){10000}){10000})");
  ASSERT_NE(g, nullptr);
  auto m = GrammarMatcher::Create(g);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("MatchLimits::max_expand_steps"), std::string::npos);
  auto small = MustParse(R"(root ::= ((("ab"){0,3}){3}){3})");
  EXPECT_TRUE(Accepts(small, ""));
  EXPECT_TRUE(Accepts(small, "ababab"));
}

TEST(GrammarHostileTest, RandomTextNeverCrashesTheParser) {
  const std::string alphabet = "root::= \"[]()|*+?{},0123456789-^\\xuU.#\na-zé\xC3";
  std::mt19937 rng(7);
  int parsed = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = i % 2 ? "root ::= " : "";
    const int n = static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) text.push_back(alphabet[rng() % alphabet.size()]);
    auto g = ParseGbnf(text);
    if (g.ok()) {
      ++parsed;
      auto m = GrammarMatcher::Create(*g);
      if (m.ok()) (*m)->AcceptBytes("aé[");
    } else {
      EXPECT_EQ(g.status().code(), Status::Code::kInvalidArgument);
      EXPECT_EQ(g.status().message().rfind("grammar", 0), 0u) << g.status().message();
    }
  }
  EXPECT_GT(parsed, 0);
}

TEST(GrammarHostileTest, DeepSchemaIsRefused) {
  OJson s = {{"type", "integer"}};
  for (int i = 0; i < 70; ++i) s = {{"type", "array"}, {"items", s}};
  auto r = SchemaToGbnf(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("schema nested deeper than 64 levels"), std::string::npos)
      << r.status().message();
}

// Half of a UTF-16 pair is no character: a literal or class holding one
// would let through (or ask for) text that is not UTF-8.
TEST(GrammarHostileTest, SurrogateEscapesAreRefused) {
  for (const char* g : {R"(root ::= "\uD800")", R"(root ::= "a\udfff")", R"(root ::= [\uD800-\uDBFF])",
                        R"(root ::= "\U0000D834")"}) {
    EXPECT_NE(ParseError(g).find("is a UTF-16 surrogate, not a character"), std::string::npos) << g;
  }
  EXPECT_EQ(ParseError(R"(root ::= "\uD7FF\uE000\U0001F600")"), "");
}

// A grammar whose root can never be completed allows no reply at all: it is
// refused when it is parsed, not answered with an empty "stop".
TEST(GrammarHostileTest, AGrammarThatAllowsNoTextIsRefused) {
  for (const char* g : {R"(root ::= [^\x00-\U0010FFFF])", "root ::= \"a\" x\nx ::= \"b\" x",
                        "root ::= x | y\nx ::= \"(\" x \")\"\ny ::= [^\\x00-\\U0010FFFF] \"z\""}) {
    EXPECT_NE(ParseError(g).find("the grammar allows no text"), std::string::npos) << g;
  }
  // Recursion with a way out, and a root that allows only the empty text, are fine.
  EXPECT_EQ(ParseError("root ::= \"a\" x\nx ::= \"b\" x | \"c\""), "");
  EXPECT_EQ(ParseError("root ::= \"\""), "");
}

TEST(GrammarHostileTest, HugeCountsAreRefusedWithThePath) {
  EXPECT_EQ(
      SchemaToGbnf(OJson::parse(R"({"properties":{"t":{"type":"string","maxLength":1000000000}}})"))
          .status()
          .message(),
      "json schema at /properties/t/maxLength: value 1000000000 exceeds the supported "
      "maximum of 65536");
  EXPECT_NE(SchemaToGbnf(OJson::parse(R"({"type":"integer","minimum":1e300})"))
                .status()
                .message()
                .find("out of the supported range"),
            std::string::npos);
}

// An enum is sized before its grammar is built: 100,000 values are refused
// naming the limit at once (they once cost 7 s of building first), and the
// largest allowed enum builds in linear time (its rule names are numbered
// from where each hint left off).
TEST(GrammarHostileTest, HugeEnumsAreRefusedBeforeTheyAreBuilt) {
  OJson huge = {{"enum", OJson::array()}};
  for (int i = 0; i < 100000; ++i) huge["enum"].push_back("value-" + std::to_string(i * 7919 % 100003));
  EXPECT_EQ(SchemaToGbnf(huge).status().message(),
            "json schema at /enum: 100000 values exceed the supported maximum of 16384");
  OJson big = {{"enum", OJson::array()}};
  for (int i = 0; i < 16384; ++i) big["enum"].push_back("v" + std::to_string(i * 7919 % 100003) + "x");
  auto g = CompileJsonSchema(big);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
}

TEST(GrammarHostileTest, RefCyclesThatConsumeNothingAreLeftRecursion) {
  for (const char* text :
       {R"({"$ref":"#"})",
        R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})",
        R"({"anyOf":[{"$ref":"#"},{"type":"null"}]})"}) {
    auto r = CompileJsonSchema(OJson::parse(text));
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find("left recursion"), std::string::npos)
        << r.status().message();
  }
}

TEST(GrammarHostileTest, LargeEnumAndManyPropertiesCompile) {
  OJson values = OJson::array();
  for (int i = 0; i < 5000; ++i) values.push_back("value-" + std::to_string(i));
  auto e = CompileJsonSchema(OJson{{"enum", values}});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE(Accepts(*e, "\"value-4321\""));
  EXPECT_FALSE(Accepts(*e, "\"value-5000\""));
  OJson props = OJson::object();
  for (int i = 0; i < 300; ++i) props["p" + std::to_string(i)] = {{"type", "integer"}};
  auto o = CompileJsonSchema(OJson{{"properties", props}});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(Accepts(*o, R"({"p7":1,"p299":2})"));
}

TEST(GrammarHostileTest, RandomSchemasNeverCrashTheConverter) {
  const char* keys[] = {
      "type",        "properties", "items",   "anyOf",     "allOf",    "$ref",
      "enum",        "const",      "minimum", "maxLength", "required", "additionalProperties",
      "prefixItems", "nullable",   "format",  "pattern",   "$defs"};
  const OJson leaves[] = {"string",
                          "integer",
                          3,
                          -1.5,
                          true,
                          nullptr,
                          OJson::array(),
                          OJson::object(),
                          "#/$defs/a",
                          "date",
                          OJson::array({"x", 1})};
  std::mt19937 rng(11);
  std::function<OJson(int)> make = [&](int depth) -> OJson {
    OJson s = OJson::object();
    const int n = static_cast<int>(rng() % 4);
    for (int k = 0; k < n; ++k) {
      const char* key = keys[rng() % std::size(keys)];
      if (depth < 4 && rng() % 2) {
        OJson child = make(depth + 1);
        s[key] = rng() % 2 ? child : OJson::array({child, make(depth + 1)});
      } else {
        s[key] = leaves[rng() % std::size(leaves)];
      }
    }
    return s;
  };
  int compiled = 0;
  for (int i = 0; i < 2000; ++i) {
    OJson s = make(0);
    auto g = CompileJsonSchema(s);
    if (g.ok()) {
      ++compiled;
    } else {
      EXPECT_EQ(g.status().code(), Status::Code::kInvalidArgument);
      EXPECT_EQ(g.status().message().rfind("json schema", 0), 0u) << g.status().message();
    }
  }
  EXPECT_GT(compiled, 0);
}

}  // namespace
}  // namespace mx::grammar
