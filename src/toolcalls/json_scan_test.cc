#include "toolcalls/json_scan.h"

#include <gtest/gtest.h>

namespace mx::toolcalls::internal {
namespace {

ScanStatus StatusOf(std::string_view text, bool at_end = false) {
  return ScanJson(text, 0, at_end).status;
}

TEST(JsonScanTest, CompactKeepsSpellingAndOrder) {
  ScanResult r = ScanJson(R"(  { "b" : 1.50e+2 , "a":[ true,null , "x y" ] }tail)", 0, false);
  ASSERT_EQ(r.status, ScanStatus::kComplete);
  EXPECT_EQ(r.value.compact, R"({"b":1.50e+2,"a":[true,null,"x y"]})");
  EXPECT_EQ(
      std::string_view(R"(  { "b" : 1.50e+2 , "a":[ true,null , "x y" ] }tail)").substr(r.end),
      "tail");
  const JsonNode& root = r.value.root();
  ASSERT_EQ(root.members.size(), 2u);
  EXPECT_EQ(root.members[0].first, "b");
  EXPECT_EQ(r.value.Text(*r.value.Member(root, "a")), R"([true,null,"x y"])");
}

TEST(JsonScanTest, EveryProperPrefixNeedsMore) {
  const std::string text = R"({"a": [1, -2.5e3, "\u00e9\n", {"b": false}], "c": "日本"})";
  for (size_t n = 0; n < text.size(); ++n) {
    EXPECT_EQ(StatusOf(text.substr(0, n)), ScanStatus::kNeedMore) << n;
    EXPECT_EQ(StatusOf(text.substr(0, n), true), ScanStatus::kInvalid) << n;
  }
  EXPECT_EQ(StatusOf(text), ScanStatus::kComplete);
}

TEST(JsonScanTest, InvalidIsDetectedAtTheBadByte) {
  EXPECT_EQ(StatusOf(R"({"a" 1)"), ScanStatus::kInvalid);
  EXPECT_EQ(StatusOf(R"({"a": 01)"), ScanStatus::kInvalid);
  EXPECT_EQ(StatusOf(R"({"a": tru )"), ScanStatus::kInvalid);
  EXPECT_EQ(StatusOf(R"({"a": "\x")"), ScanStatus::kInvalid);
  EXPECT_EQ(StatusOf(R"({'a': 1})"), ScanStatus::kInvalid);
  EXPECT_EQ(StatusOf("{\"a\": \"\xC0\xAF\"}"), ScanStatus::kInvalid);      // overlong
  EXPECT_EQ(StatusOf("{\"a\": \"\xED\xA0\x80\"}"), ScanStatus::kInvalid);  // surrogate
  EXPECT_EQ(StatusOf(R"([1,])"), ScanStatus::kInvalid);
}

TEST(JsonScanTest, TopLevelNumberEndsOnlyAtTheEnd) {
  EXPECT_EQ(StatusOf("12"), ScanStatus::kNeedMore);
  EXPECT_EQ(StatusOf("12", true), ScanStatus::kComplete);
  EXPECT_EQ(StatusOf("12 "), ScanStatus::kComplete);
  EXPECT_EQ(StatusOf("-", true), ScanStatus::kInvalid);
}

TEST(JsonScanTest, RawControlCharactersAreEscaped) {
  ScanResult r = ScanJson("{\"code\": \"a\n\tb\x01\"}", 0, false);
  ASSERT_EQ(r.status, ScanStatus::kComplete);
  EXPECT_EQ(r.value.compact, R"({"code":"a\n\tb\u0001"})");
}

TEST(JsonScanTest, DepthIsBounded) {
  const std::string deep(200, '[');
  EXPECT_EQ(StatusOf(deep), ScanStatus::kInvalid);
  EXPECT_EQ(StatusOf(std::string(100, '[') + std::string(100, ']')), ScanStatus::kComplete);
}

TEST(JsonScanTest, DecodeAndQuote) {
  EXPECT_EQ(DecodeJsonString(R"("a\"b\\c\/\n\u00e9\ud83d\ude00\ud800")"),
            "a\"b\\c/\n\xC3\xA9\xF0\x9F\x98\x80\xEF\xBF\xBD");
  EXPECT_EQ(QuoteJsonString("a\"b\\\n\x01\xC3\xA9\xFF"),
            "\"a\\\"b\\\\\\n\\u0001\xC3\xA9\xEF\xBF\xBD\"");
}

}  // namespace
}  // namespace mx::toolcalls::internal
