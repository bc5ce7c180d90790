#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mx::tokenizer {
namespace {

// --- pre-tokenizer semantics -----------------------------------------------

std::vector<std::string> Words(internal::PreType type, std::string_view text) {
  auto pre = internal::PreTokenizer::Create(type);
  EXPECT_TRUE(pre.ok()) << pre.status().ToString();
  std::vector<size_t> ends;
  pre.value()->Split(text, &ends);
  std::vector<std::string> words;
  size_t begin = 0;
  for (size_t end : ends) {
    words.emplace_back(text.substr(begin, end - begin));
    begin = end;
  }
  return words;
}

using W = std::vector<std::string>;

TEST(PreTokenizerTest, Llama3Splits) {
  using internal::PreType;
  EXPECT_EQ(Words(PreType::kLlama3, "Hello world"), (W{"Hello", " world"}));
  EXPECT_EQ(Words(PreType::kLlama3, "  x"), (W{" ", " x"}));  // \s+(?!\S) keeps one space back
  EXPECT_EQ(Words(PreType::kLlama3, "a\n\nb"), (W{"a", "\n\n", "b"}));
  EXPECT_EQ(Words(PreType::kLlama3, "a  \n b"), (W{"a", "  \n", " b"}));
  EXPECT_EQ(Words(PreType::kLlama3, "a   "), (W{"a", "   "}));
  EXPECT_EQ(Words(PreType::kLlama3, "2024!"), (W{"202", "4", "!"}));
  EXPECT_EQ(Words(PreType::kLlama3, "DON'T we've"), (W{"DON", "'T", " we", "'ve"}));
  EXPECT_EQ(Words(PreType::kLlama3, "x ...\n\ny"), (W{"x", " ...\n\n", "y"}));
  EXPECT_EQ(Words(PreType::kLlama3, "a\xC2\xA0" "b"), (W{"a", "\xC2\xA0" "b"}));  // NBSP
  EXPECT_EQ(Words(PreType::kLlama3, ""), W{});
}

TEST(PreTokenizerTest, Qwen2SplitsDigitsSingly) {
  EXPECT_EQ(Words(internal::PreType::kQwen2, "v2024"), (W{"v", "2", "0", "2", "4"}));
}

TEST(PreTokenizerTest, Gpt2AndDefaultSplits) {
  using internal::PreType;
  EXPECT_EQ(Words(PreType::kGpt2, "Hello  world"), (W{"Hello", " ", " world"}));
  EXPECT_EQ(Words(PreType::kGpt2, "a\t\tb"), (W{"a", "\t", "\t", "b"}));
  EXPECT_EQ(Words(PreType::kGpt2, "it's 42"), (W{"it", "'s", " 42"}));
  // Each regex re-splits the pieces of the previous one; gaps are kept.
  EXPECT_EQ(Words(PreType::kDefault, "x+=1000"), (W{"x", "+=", "100", "0"}));
  EXPECT_EQ(Words(PreType::kStarcoder, "ab 12"), (W{"ab", " ", "1", "2"}));
}

TEST(PreTokenizerTest, WhitespaceIsLlamaCppsSet) {
  using internal::PreType;
  // U+180E is whitespace for PCRE2's UCP \s but not for llama.cpp.
  const std::string mvs = "\xE1\xA0\x8E";
  EXPECT_EQ(Words(PreType::kGpt2, "x" + mvs + mvs + "y"), (W{"x", mvs + mvs, "y"}));
  // U+001C..001F are not whitespace either; U+0085 and U+3000 are.
  EXPECT_EQ(Words(PreType::kGpt2, "x\x1C\x1Dy"), (W{"x", "\x1C\x1D", "y"}));
  EXPECT_EQ(Words(PreType::kGpt2, "x\xC2\x85\xE3\x80\x80y"),
            (W{"x", "\xC2\x85", "\xE3\x80\x80", "y"}));
}

TEST(PreTokenizerTest, LongRunsDoNotFail) {
  const std::string spaces(1 << 20, ' ');
  EXPECT_EQ(Words(internal::PreType::kLlama3, spaces + "x"),
            (W{std::string((1 << 20) - 1, ' '), " x"}));
  const std::string letters(1 << 20, 'a');
  EXPECT_EQ(Words(internal::PreType::kGpt2, letters), (W{letters}));
}

TEST(PreTokenizerTest, UnknownNamesAreNotImplemented) {
  EXPECT_TRUE(internal::LookupPreType("llama-bpe").has_value());
  EXPECT_TRUE(internal::LookupPreType("llama-bpe")->ignore_merges);
  EXPECT_FALSE(internal::LookupPreType("qwen2")->ignore_merges);
  EXPECT_FALSE(internal::LookupPreType("tekken").has_value());
}

}  // namespace
}  // namespace mx::tokenizer
