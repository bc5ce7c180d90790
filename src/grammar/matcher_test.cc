// GrammarMatcher: accept / reject / prefix on strings, ambiguity, UTF-8 split
// across calls, bounds, clones.
#include "grammar/matcher.h"

#include <gtest/gtest.h>

#include "grammar/grammar_test_util.h"

namespace mx::grammar {
namespace {

TEST(MatcherTest, AcceptRejectPrefix) {
  auto g = MustParse(R"(root ::= "{" [a-z]+ ":" [0-9]+ "}")");
  EXPECT_TRUE(Accepts(g, "{ab:12}"));
  EXPECT_FALSE(Accepts(g, "{ab:12"));
  EXPECT_TRUE(IsPrefix(g, "{ab:12"));
  EXPECT_TRUE(IsPrefix(g, ""));
  EXPECT_FALSE(IsPrefix(g, "{ab;"));
  EXPECT_FALSE(IsPrefix(g, "{ab:12}x"));
}

TEST(MatcherTest, FailedAcceptLeavesPositionUnchanged) {
  auto m = GrammarMatcher::Create(MustParse(R"(root ::= "abc")")).value();
  ASSERT_TRUE(m->AcceptBytes("a"));
  EXPECT_FALSE(m->AcceptBytes("bx"));
  EXPECT_TRUE(m->AcceptBytes("bc"));
  EXPECT_TRUE(m->IsAccepting());
}

TEST(MatcherTest, AmbiguousGrammarKeepsEveryParse) {
  // "ab" can be x="a" then y="b", or x="ab" then y="" ; both continue differently.
  auto g = MustParse(R"(root ::= x y "!"
x ::= "a" | "ab"
y ::= "b" "c" | "")");
  EXPECT_TRUE(Accepts(g, "ab!"));
  EXPECT_TRUE(Accepts(g, "abc!"));
  EXPECT_TRUE(Accepts(g, "a!"));
  EXPECT_FALSE(Accepts(g, "ac!"));
  EXPECT_FALSE(Accepts(g, "abcb!"));
}

TEST(MatcherTest, Utf8SplitAcrossCalls) {
  auto m = GrammarMatcher::Create(MustParse(R"(root ::= "é" [中-中] "x")")).value();
  EXPECT_TRUE(m->AcceptBytes("\xC3"));
  EXPECT_FALSE(m->IsAccepting());
  EXPECT_TRUE(m->AcceptBytes("\xA9\xE4\xB8"));
  EXPECT_FALSE(m->CanAccept("\xAE"));  // 丮, not 中
  EXPECT_TRUE(m->AcceptBytes("\xAD"));
  EXPECT_TRUE(m->AcceptBytes("x"));
  EXPECT_TRUE(m->IsAccepting());
}

TEST(MatcherTest, PartialCharacterIsCheckedAgainstWhatMayFollow) {
  auto m = GrammarMatcher::Create(MustParse(R"(root ::= [a-z] | [α-ω])")).value();
  EXPECT_TRUE(m->CanAccept("\xCE"));   // lead byte of α..ο
  EXPECT_FALSE(m->CanAccept("\xE4"));  // a 3-byte character: none allowed
  EXPECT_FALSE(m->CanAccept("\x80"));  // continuation byte without a lead
  EXPECT_FALSE(m->CanAccept("\xC0"));  // never valid UTF-8
}

TEST(MatcherTest, OverlongAndSurrogateEncodingsAreRejected) {
  auto m = GrammarMatcher::Create(MustParse(R"(root ::= .*)")).value();
  EXPECT_FALSE(m->CanAccept("\xE0\x80\xAF"));  // overlong '/'
  EXPECT_FALSE(m->CanAccept("\xED\xA0\x80"));  // U+D800
  EXPECT_TRUE(m->CanAccept("\xF0\x9F\x98\x80"));
}

TEST(MatcherTest, CanOnlyEnd) {
  auto m = GrammarMatcher::Create(MustParse(R"(root ::= "ab" "c"?)")).value();
  ASSERT_TRUE(m->AcceptBytes("ab"));
  EXPECT_TRUE(m->IsAccepting());
  EXPECT_FALSE(m->CanOnlyEnd());
  ASSERT_TRUE(m->AcceptBytes("c"));
  EXPECT_TRUE(m->CanOnlyEnd());
}

TEST(MatcherTest, CloneIsIndependent) {
  auto m = GrammarMatcher::Create(MustParse(R"(root ::= "a" ("b" | "c"))")).value();
  ASSERT_TRUE(m->AcceptBytes("a"));
  auto c = m->Clone();
  EXPECT_TRUE(c->AcceptBytes("b"));
  EXPECT_TRUE(c->IsAccepting());
  EXPECT_FALSE(m->IsAccepting());
  EXPECT_TRUE(m->AcceptBytes("c"));
}

TEST(MatcherTest, DeepNestingDoesNotRecurse) {
  auto g = MustParse(R"(root ::= "[" root? "]")");
  std::string s(20000, '[');
  s += std::string(20000, ']');
  EXPECT_TRUE(Accepts(g, s));
  EXPECT_FALSE(Accepts(g, s + "]"));
}

TEST(MatcherTest, TooManyLiveParsesAreRefusedNotExponential) {
  // Each "a" can close any of the open x's: the number of parses grows.
  auto g = MustParse(R"(root ::= x*
x ::= "a" | "a" x "b" | "a" "a"? x?)");
  MatchLimits limits;
  limits.max_stacks = 64;
  auto m = GrammarMatcher::Create(g, limits).value();
  bool refused = false;
  for (int i = 0; i < 200 && !refused; ++i) refused = !m->AcceptBytes("a");
  EXPECT_TRUE(refused);
  EXPECT_TRUE(m->overflowed());
}

TEST(MatcherTest, CachesAreRebuiltWhenLarge) {
  // A counter: every character moves to a new state.
  auto g = MustParse(R"(root ::= [a-z]{0,3000})");
  MatchLimits limits;
  limits.soft_max_states = 100;
  auto m = GrammarMatcher::Create(g, limits).value();
  const uint64_t gen = m->generation();
  for (int i = 0; i < 3000; ++i) ASSERT_TRUE(m->AcceptBytes("q")) << i;
  EXPECT_TRUE(m->IsAccepting());
  EXPECT_FALSE(m->CanAccept("q"));
  EXPECT_GT(m->generation(), gen);
  EXPECT_LE(m->n_states(), 102u);
}

}  // namespace
}  // namespace mx::grammar
