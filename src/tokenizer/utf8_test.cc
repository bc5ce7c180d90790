#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace mx::tokenizer {
namespace {

std::string Hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

TEST(Utf8Test, StrictValidation) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii, long enough for the 8-byte fast path"));
  EXPECT_TRUE(IsValidUtf8("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x99\x82\xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(IsValidUtf8("\xC0\x80"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));          // truncated
  EXPECT_FALSE(IsValidUtf8("abcdefgh\x80"));       // stray continuation after the fast path
}

TEST(Utf8Test, LenientDecodingFollowsLlamaCpp) {
  EXPECT_EQ(NormalizeUtf8Lenient("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(NormalizeUtf8Lenient(std::string("\xC0\x80", 2)), std::string(1, '\0'));
  EXPECT_EQ(NormalizeUtf8Lenient("\xE0\x80\x80\xC1"), std::string("\0", 1) + "\xEF\xBF\xBD");
  EXPECT_EQ(NormalizeUtf8Lenient("\xED\xA0\x80"), "\xED\xA0\x80");  // surrogate kept
  EXPECT_EQ(NormalizeUtf8Lenient("\x80\xFF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  const LenientChar c = DecodeLenient("\xF0\x9F\x99\x82", 0);
  EXPECT_TRUE(c.valid);
  EXPECT_EQ(c.cpt, 0x1F642u);
  EXPECT_EQ(c.len, 4u);
  EXPECT_FALSE(DecodeLenient("\xF0\x9F\x99", 0).valid);
}

// --- Utf8StreamDecoder -------------------------------------------------------

TEST(Utf8StreamDecoderTest, SplitsMultiByteCharactersAcrossPushes) {
  Utf8StreamDecoder d;
  EXPECT_EQ(d.Push("a\xE2"), "a");
  EXPECT_EQ(d.pending_bytes(), 1u);
  EXPECT_EQ(d.Push("\x82"), "");
  EXPECT_EQ(d.Push("\xAC" "b"), "\xE2\x82\xAC" "b");  // €
  EXPECT_EQ(d.Push("\xF0\x9F"), "");
  EXPECT_EQ(d.Push("\x99\x82"), "\xF0\x9F\x99\x82");  // 🙂
  EXPECT_EQ(d.Flush(), "");
}

TEST(Utf8StreamDecoderTest, ByteByByteEmojiZwjSequence) {
  const std::string s = "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7";
  Utf8StreamDecoder d;
  std::string out;
  for (char c : s) out += d.Push(std::string_view(&c, 1));
  out += d.Flush();
  EXPECT_EQ(out, s);
}

TEST(Utf8StreamDecoderTest, InvalidBytesBecomeReplacementCharacters) {
  Utf8StreamDecoder d;
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(d.Push("\xFF" "a"), fffd + "a");
  EXPECT_EQ(d.Push("\xC0\x80"), fffd + fffd);          // overlong: no valid prefix
  EXPECT_EQ(d.Push("\xED\xA0\x80"), fffd + fffd + fffd);  // surrogate
  EXPECT_EQ(d.Push("\xE2\x82" "x"), fffd + "x");        // truncated sequence: one U+FFFD
  EXPECT_EQ(d.Push("\xF0\x9F\x99"), "");
  EXPECT_EQ(d.Flush(), fffd);  // incomplete tail at the end
  EXPECT_EQ(d.Flush(), "");
  EXPECT_EQ(d.Push("ok"), "ok");
}

TEST(Utf8StreamDecoderTest, RandomChunkingMatchesOneShot) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 200; ++iter) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 3 == 0 ? rng() : 0xE0 + rng() % 0x20);
    Utf8StreamDecoder whole;
    std::string want = whole.Push(s);
    want += whole.Flush();
    EXPECT_TRUE(IsValidUtf8(want));
    Utf8StreamDecoder chunked;
    std::string got;
    for (size_t i = 0; i < s.size();) {
      const size_t n = std::min<size_t>(1 + rng() % 4, s.size() - i);
      got += chunked.Push(std::string_view(s).substr(i, n));
      i += n;
    }
    got += chunked.Flush();
    EXPECT_EQ(got, want) << Hex(s);
  }
}

}  // namespace
}  // namespace mx::tokenizer
