#include "engine/text_stream.h"

#include <gtest/gtest.h>

namespace mx::engine {
namespace {

std::string Feed(TextStream& ts, std::initializer_list<const char*> pieces) {
  std::string out;
  for (const char* p : pieces) out += ts.Push(p);
  return out;
}

TEST(TextStreamTest, NoStopPassesEverything) {
  TextStream ts({});
  EXPECT_EQ(Feed(ts, {"Hel", "lo"}), "Hello");
  EXPECT_EQ(ts.Flush(), "");
}

TEST(TextStreamTest, StopStringSplitAcrossPiecesIsCut) {
  TextStream ts({"STOP"});
  std::string out = Feed(ts, {"abc S", "TO", "P tail"});
  EXPECT_EQ(out, "abc ");
  EXPECT_TRUE(ts.stopped());
  EXPECT_EQ(ts.Push("more"), "");
  EXPECT_EQ(ts.Flush(), "");
}

TEST(TextStreamTest, HeldPrefixIsReleasedWhenItCannotMatch) {
  TextStream ts({"STOP"});
  EXPECT_EQ(ts.Push("ab ST"), "ab ");
  EXPECT_EQ(ts.Push("X"), "STX");
  EXPECT_FALSE(ts.stopped());
}

TEST(TextStreamTest, FlushReleasesHeldText) {
  TextStream ts({"STOP"});
  EXPECT_EQ(ts.Push("xSTO"), "x");
  EXPECT_EQ(ts.Flush(), "STO");
}

TEST(TextStreamTest, EarliestOfSeveralStopStrings) {
  TextStream ts({"world", "lo"});
  EXPECT_EQ(Feed(ts, {"hello world"}), "hel");
  EXPECT_TRUE(ts.stopped());
}

TEST(TextStreamTest, SplitUtf8CharacterIsSentWhole) {
  TextStream ts({});
  EXPECT_EQ(ts.Push("\xC3"), "");
  EXPECT_EQ(ts.Push("\xA9"), "\xC3\xA9");
}

}  // namespace
}  // namespace mx::engine
