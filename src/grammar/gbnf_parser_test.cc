// GBNF parser: the syntax llama.cpp accepts, and one error per problem.
#include <gtest/gtest.h>

#include "grammar/grammar_test_util.h"

namespace mx::grammar {
namespace {

TEST(GbnfParserTest, LiteralsAlternativesAndRules) {
  auto g =
      MustParse("root ::= greeting \" \" name\ngreeting ::= \"hi\" | \"hello\"\nname ::= \"bob\"");
  EXPECT_TRUE(Accepts(g, "hi bob"));
  EXPECT_TRUE(Accepts(g, "hello bob"));
  EXPECT_FALSE(Accepts(g, "hey bob"));
  EXPECT_FALSE(Accepts(g, "hi bo"));
}

TEST(GbnfParserTest, Escapes) {
  auto g = MustParse(R"(root ::= "a\nb\r\t\\\"\x41\u00e9\U0001F600")");
  EXPECT_TRUE(Accepts(g, "a\nb\r\t\\\"A\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_FALSE(Accepts(g, "a\\nb"));
}

TEST(GbnfParserTest, CharacterClasses) {
  auto g = MustParse(R"(root ::= [a-z0-9_] [^"\\] [\]\[-] .)");
  EXPECT_TRUE(Accepts(g, "a\"-x") == false);  // [^"\\] rejects the quote
  EXPECT_TRUE(Accepts(g, "_x]\n"));
  EXPECT_TRUE(Accepts(g, "9\xC3\xA9[\xE4\xB8\xAD"));  // é and 中
  EXPECT_FALSE(Accepts(g, "A"));
  EXPECT_FALSE(Accepts(g, "a\\-x"));
}

TEST(GbnfParserTest, Repetitions) {
  auto g = MustParse(R"(root ::= "a"* "b"+ "c"? [0-9]{2} "x"{1,} "y"{0,2} ("ab"){2,3})");
  EXPECT_TRUE(Accepts(g, "b12xabab"));
  EXPECT_TRUE(Accepts(g, "aaabbbc12xxxyyababab"));
  EXPECT_FALSE(Accepts(g, "12xabab"));      // needs a b
  EXPECT_FALSE(Accepts(g, "b1xabab"));      // two digits
  EXPECT_FALSE(Accepts(g, "b12abab"));      // x{1,}
  EXPECT_FALSE(Accepts(g, "b12xyyyabab"));  // y{0,2}
  EXPECT_FALSE(Accepts(g, "b12xab"));       // ("ab"){2,3}
  EXPECT_FALSE(Accepts(g, "b12xabababab"));
}

TEST(GbnfParserTest, GroupsSpanLinesAndCommentsAreSpace) {
  auto g = MustParse(
      "# a comment\n"
      "root ::= (\n"
      "  \"x\" |   # first\n"
      "  \"y\"\n"
      ") tail\n"
      "\n"
      "tail ::= \"!\"  # end\n");
  EXPECT_TRUE(Accepts(g, "x!"));
  EXPECT_TRUE(Accepts(g, "y!"));
  EXPECT_FALSE(Accepts(g, "x"));
}

TEST(GbnfParserTest, AlternativeContinuesAfterBarOnNextLine) {
  auto g = MustParse("root ::= \"a\" |\n  \"b\"\r\nother ::= \"c\"\r\n");
  EXPECT_TRUE(Accepts(g, "b"));
  EXPECT_FALSE(Accepts(g, "c"));
}

TEST(GbnfParserTest, EmptyAlternativeAndRecursion) {
  auto g = MustParse("root ::= \"(\" root \")\" root | ");
  EXPECT_TRUE(Accepts(g, ""));
  EXPECT_TRUE(Accepts(g, "(()())"));
  EXPECT_FALSE(Accepts(g, "(()"));
  EXPECT_TRUE(IsPrefix(g, "(()"));
}

TEST(GbnfParserTest, RuleNamesWithDigitsAndDashes) {
  auto g = MustParse("root ::= rule-2a\nrule-2a ::= \"ok\"");
  EXPECT_TRUE(Accepts(g, "ok"));
}

TEST(GbnfParserTest, UndefinedRuleNamesItsPosition) {
  EXPECT_EQ(ParseError("root ::= value\nval ::= \"x\""),
            "grammar line 1:10: undefined rule 'value'");
}

TEST(GbnfParserTest, MissingRoot) {
  EXPECT_EQ(ParseError("start ::= \"x\""),
            "grammar: no 'root' rule (the grammar starts at 'root ::= ...')");
  EXPECT_NE(ParseError("").find("no 'root' rule"), std::string::npos);
}

TEST(GbnfParserTest, UnterminatedLiteral) {
  EXPECT_EQ(ParseError("root ::= \"abc"), "grammar line 1:10: unterminated string literal");
}

TEST(GbnfParserTest, UnterminatedClass) {
  EXPECT_EQ(ParseError("root ::= [a-z"),
            "grammar line 1:10: unterminated character class (expected ']')");
}

TEST(GbnfParserTest, UnclosedGroup) {
  EXPECT_NE(ParseError("root ::= (\"a\" | \"b\"").find("1:10: unclosed '('"), std::string::npos);
}

TEST(GbnfParserTest, MissingDefinitionOperator) {
  EXPECT_EQ(ParseError("root = \"a\""),
            "grammar line 1:6: expected '::=' after rule name 'root', found '='");
}

TEST(GbnfParserTest, GarbageAfterRule) {
  EXPECT_EQ(ParseError("root ::= \"a\" )"),
            "grammar line 1:14: expected a newline or the end after rule 'root', found ')'");
}

TEST(GbnfParserTest, BadEscapes) {
  EXPECT_EQ(ParseError(R"(root ::= "\q")"), "grammar line 1:11: unknown escape '\\q'");
  EXPECT_EQ(ParseError(R"(root ::= "\x4")"), "grammar line 1:11: escape '\\x' needs 2 hex digits");
  EXPECT_EQ(ParseError(R"(root ::= "\U00110000")"), "grammar line 1:11: escape beyond U+10FFFF");
}

TEST(GbnfParserTest, ReversedRange) {
  EXPECT_EQ(ParseError("root ::= [z-a]"),
            "grammar line 1:12: character range is reversed (end before start)");
}

TEST(GbnfParserTest, RepetitionErrors) {
  EXPECT_EQ(ParseError("root ::= *"), "grammar line 1:10: '*' has nothing before it to repeat");
  EXPECT_EQ(ParseError("root ::= \"a\"{3,1}"), "grammar line 1:13: repetition {3,1} has max < min");
  EXPECT_EQ(ParseError("root ::= \"a\"{x}"),
            "grammar line 1:14: expected a number in the repetition, found 'x'");
}

TEST(GbnfParserTest, DuplicateRule) {
  EXPECT_EQ(ParseError("root ::= a\na ::= \"x\"\na ::= \"y\""),
            "grammar line 3:1: rule 'a' is defined twice (first at line 2:1)");
}

TEST(GbnfParserTest, InvalidUtf8InLiteral) {
  EXPECT_EQ(ParseError("root ::= \"\xC3(\""), "grammar line 1:11: invalid UTF-8");
}

TEST(GbnfParserTest, DirectLeftRecursion) {
  EXPECT_EQ(ParseError("root ::= root \"a\" | \"b\""),
            "grammar line 1:1: left recursion: rule 'root' can begin with itself (root -> root)");
}

TEST(GbnfParserTest, IndirectLeftRecursionThroughNullableRule) {
  const std::string e =
      ParseError("root ::= expr\nexpr ::= opt term\nopt ::= \"-\"?\nterm ::= expr \"x\" | \"y\"");
  EXPECT_NE(e.find("left recursion: rule 'expr' can begin with itself (expr -> term -> expr)"),
            std::string::npos)
      << e;
}

TEST(GbnfParserTest, StarOfNullableIsLeftRecursion) {
  // As in llama.cpp: (x?)* could loop without consuming anything.
  EXPECT_NE(ParseError("root ::= (\"x\"?)*").find("left recursion"), std::string::npos);
}

TEST(GbnfParserTest, RightRecursionIsFine) {
  auto g = MustParse("root ::= \"a\" root | \"b\"");
  EXPECT_TRUE(Accepts(g, "aaab"));
}

TEST(GbnfParserTest, LiteralHelperRoundTrips) {
  std::string lit;
  AppendGbnfLiteral("q\"b\\n\n\x01\x7f\xC3\xA9", &lit);
  auto g = MustParse("root ::= " + lit);
  EXPECT_TRUE(Accepts(g, "q\"b\\n\n\x01\x7f\xC3\xA9"));
}

}  // namespace
}  // namespace mx::grammar
