#include "server/reasoning.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mx::server {
namespace {

struct Split {
  std::string reasoning, content;
};

// Feeds `pieces` one by one, then finishes.
Split SplitAll(bool starts_inside, const std::vector<std::string>& pieces) {
  ReasoningSplitter s(starts_inside);
  Split out;
  for (const std::string& p : pieces) s.Feed(p, &out.reasoning, &out.content);
  s.Finish(&out.reasoning, &out.content);
  return out;
}

TEST(ReasoningSplitterTest, PromptThatEndsInAnOpenBlock) {
  EXPECT_TRUE(PromptOpensThinkBlock("<|im_start|>assistant\n<think>\n"));
  EXPECT_TRUE(PromptOpensThinkBlock("<think>"));
  EXPECT_FALSE(PromptOpensThinkBlock("<think>\n\n</think>\n\n"));  // thinking switched off
  EXPECT_FALSE(PromptOpensThinkBlock("<|im_start|>assistant\n"));
  EXPECT_FALSE(PromptOpensThinkBlock("think>"));
}

TEST(ReasoningSplitterTest, ThinkBlockAtTheStartIsReasoning) {
  const Split s = SplitAll(false, {"<think>\nweigh it\n</think>\n\nThe answer."});
  EXPECT_EQ(s.reasoning, "\nweigh it\n");
  EXPECT_EQ(s.content, "The answer.");
}

TEST(ReasoningSplitterTest, PromptThatOpenedTheBlockStartsInside) {
  const Split s = SplitAll(true, {"weigh it", "</think>", "\n\nyes"});
  EXPECT_EQ(s.reasoning, "weigh it");
  EXPECT_EQ(s.content, "yes");
}

TEST(ReasoningSplitterTest, TagsSplitAcrossPiecesAreFound) {
  const Split s = SplitAll(false, {"<th", "ink>a", "b</th", "in", "k>c"});
  EXPECT_EQ(s.reasoning, "ab");
  EXPECT_EQ(s.content, "c");
}

TEST(ReasoningSplitterTest, NoThinkBlockIsAllContent) {
  EXPECT_EQ(SplitAll(false, {"plain ", "answer <think> later"}).content,
            "plain answer <think> later");
  EXPECT_EQ(SplitAll(false, {"plain"}).reasoning, "");
  // Text that only looks like the tag's start at first.
  EXPECT_EQ(SplitAll(false, {"<th", "is"}).content, "<this");
}

TEST(ReasoningSplitterTest, UnfinishedBlockStaysReasoning) {
  const Split s = SplitAll(true, {"still thinking </thi"});
  EXPECT_EQ(s.reasoning, "still thinking </thi");
  EXPECT_EQ(s.content, "");
}

TEST(ReasoningSplitterTest, ReleasesEverythingItCanAsItGoes) {
  ReasoningSplitter s(true);
  std::string r, c;
  s.Feed("abc</", &r, &c);
  EXPECT_EQ(r, "abc");  // "</" held back: it may be the close tag
  s.Feed("b>", &r, &c);
  EXPECT_EQ(r, "abc</b>");
  s.Feed("</think>x", &r, &c);
  EXPECT_EQ(c, "x");
}

}  // namespace
}  // namespace mx::server
