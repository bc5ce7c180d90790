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

// qwen35 is qwen2 with combining marks (\p{M}) in the letter runs and out of
// the punctuation runs. The expected words below are derived by hand from
// the two regexes (alternatives tried in order at each position).

TEST(PreTokenizerTest, Qwen35KeepsDecomposedAccentsInTheWord) {
  using internal::PreType;
  // e + U+0301 (combining acute, Mn) + t + U+00E9 (precomposed é, Ll).
  const std::string etet = "e\u0301t\u00e9";
  EXPECT_EQ(Words(PreType::kQwen35, etet), (W{etet}));
  // qwen2: the mark ends "e" and is the optional character before "té".
  EXPECT_EQ(Words(PreType::kQwen2, etet), (W{"e", "\u0301t\u00e9"}));
  // Followed by a space, qwen2's mark has no letter after it: a punctuation run.
  EXPECT_EQ(Words(PreType::kQwen35, "cafe\u0301 ok"), (W{"cafe\u0301", " ok"}));
  EXPECT_EQ(Words(PreType::kQwen2, "cafe\u0301 ok"), (W{"cafe", "\u0301", " ok"}));
  // llama3 keeps qwen2's letter runs (the shared pattern did not change).
  EXPECT_EQ(Words(PreType::kLlama3, etet), (W{"e", "\u0301t\u00e9"}));
}

TEST(PreTokenizerTest, Qwen35KeepsDevanagariViramaAndVowelSignsInTheWord) {
  using internal::PreType;
  // नमस्ते: na ma sa (Lo), virama U+094D (Mn), ta (Lo), vowel sign e U+0947 (Mn).
  const std::string namaste = "\u0928\u092E\u0938\u094D\u0924\u0947";
  EXPECT_EQ(Words(PreType::kQwen35, namaste), (W{namaste}));
  EXPECT_EQ(Words(PreType::kQwen2, namaste), (W{"\u0928\u092E\u0938", "\u094D\u0924", "\u0947"}));
}

TEST(PreTokenizerTest, Qwen35KeepsThaiVowelMarksInTheWord) {
  using internal::PreType;
  // สวัสดี ครับ: U+0E31 (mai han-akat) and U+0E35 (sara ii) are Mn, the rest Lo.
  const std::string sawasdee = "\u0E2A\u0E27\u0E31\u0E2A\u0E14\u0E35";
  const std::string khrap = "\u0E04\u0E23\u0E31\u0E1A";
  EXPECT_EQ(Words(PreType::kQwen35, sawasdee + " " + khrap), (W{sawasdee, " " + khrap}));
  EXPECT_EQ(Words(PreType::kQwen2, sawasdee + " " + khrap),
            (W{"\u0E2A\u0E27", "\u0E31\u0E2A\u0E14", "\u0E35", " \u0E04\u0E23", "\u0E31\u0E1A"}));
}

TEST(PreTokenizerTest, Qwen35MarkAfterPunctuationStartsAWord) {
  using internal::PreType;
  // The punctuation character is the optional character before the mark's word.
  EXPECT_EQ(Words(PreType::kQwen35, "a,\u0301b"), (W{"a", ",\u0301b"}));
  EXPECT_EQ(Words(PreType::kQwen2, "a,\u0301b"), (W{"a", ",\u0301", "b"}));
  EXPECT_EQ(Words(PreType::kQwen35, " \u0301x"), (W{" \u0301x"}));
  EXPECT_EQ(Words(PreType::kQwen2, " \u0301x"), (W{" \u0301", "x"}));
  // With nothing after it, the mark leaves the punctuation run as a word of its own.
  EXPECT_EQ(Words(PreType::kQwen35, "...\u0301"), (W{"...", "\u0301"}));
  EXPECT_EQ(Words(PreType::kQwen2, "...\u0301"), (W{"...\u0301"}));
}

TEST(PreTokenizerTest, Qwen35MarkAfterDigitIsItsOwnWord) {
  using internal::PreType;
  // A digit cannot be the character before a word, and \p{N} takes one digit.
  EXPECT_EQ(Words(PreType::kQwen35, "5\u0301!"), (W{"5", "\u0301", "!"}));
  EXPECT_EQ(Words(PreType::kQwen2, "5\u0301!"), (W{"5", "\u0301!"}));
  // Keycap 1️⃣: 1, U+FE0F (Mn), U+20E3 (enclosing keycap, Me).
  EXPECT_EQ(Words(PreType::kQwen35, "1\uFE0F\u20E3."), (W{"1", "\uFE0F\u20E3", "."}));
  EXPECT_EQ(Words(PreType::kQwen2, "1\uFE0F\u20E3."), (W{"1", "\uFE0F\u20E3."}));
}

TEST(PreTokenizerTest, Qwen35SplitsVariationSelectorFromEmojiAfterSpace) {
  using internal::PreType;
  // ❤️ = U+2764 (So) + U+FE0F (variation selector 16, Mn).
  const std::string heart = "\u2764\uFE0F";
  // " ❤" is a punctuation run that stops at the mark; the mark is then a word.
  EXPECT_EQ(Words(PreType::kQwen35, "I " + heart + " it"), (W{"I", " \u2764", "\uFE0F", " it"}));
  EXPECT_EQ(Words(PreType::kQwen2, "I " + heart + " it"), (W{"I", " " + heart, " it"}));
  // Without the space ❤ is the character before the word "\uFE0F".
  EXPECT_EQ(Words(PreType::kQwen35, heart + "!"), (W{heart, "!"}));
  EXPECT_EQ(Words(PreType::kQwen2, heart + "!"), (W{heart + "!"}));
}

TEST(PreTokenizerTest, Qwen35IsQwen2WithoutMarks) {
  using internal::PreType;
  for (PreType type : {PreType::kQwen2, PreType::kQwen35}) {
    SCOPED_TRACE(internal::PreTypeName(type));
    EXPECT_EQ(Words(type, "v2024"), (W{"v", "2", "0", "2", "4"}));
    EXPECT_EQ(Words(type, "a  \n b"), (W{"a", "  \n", " b"}));
    EXPECT_EQ(Words(type, "DON'T x ...\n\ny"), (W{"DON", "'T", " x", " ...\n\n", "y"}));
    EXPECT_EQ(Words(type, "caf\u00e9 \u2764!"), (W{"caf\u00e9", " \u2764!"}));
  }
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
  ASSERT_TRUE(internal::LookupPreType("qwen35").has_value());
  EXPECT_EQ(internal::LookupPreType("qwen35")->type, internal::PreType::kQwen35);
  EXPECT_FALSE(internal::LookupPreType("qwen35")->ignore_merges);
  EXPECT_FALSE(internal::LookupPreType("qwen35")->add_bos);
  EXPECT_FALSE(internal::LookupPreType("no-such-pre").has_value());
}

}  // namespace
}  // namespace mx::tokenizer

namespace mx::tokenizer {
namespace {

using W2 = std::vector<std::string>;
using internal::PreType;

// deepseek-v3 (llama.cpp's three regexes in turn, derived by hand): digits in
// runs of at most three, CJK ideographs and kana as one run, a word may take
// one ASCII punctuation mark in front, combining marks stay in their word.
TEST(PreTokenizerDeepseekTest, V3Splits) {
  EXPECT_EQ(Words(PreType::kDeepseek3, "Hello, world! 12345"),
            (W2{"Hello", ",", " world", "!", " ", "123", "45"}));
  EXPECT_EQ(Words(PreType::kDeepseek3, "日本語テスト ok"), (W2{"日本語テスト", " ok"}));
  EXPECT_EQ(Words(PreType::kDeepseek3, "a.b_c"), (W2{"a", ".b", "_c"}));
  EXPECT_EQ(Words(PreType::kDeepseek3, "cafe\xCC\x81!"), (W2{"cafe\xCC\x81", "!"}));
  EXPECT_EQ(Words(PreType::kDeepseek3, "x\n\ny"), (W2{"x", "\n\n", "y"}));
}

// deepseek-llm: newlines alone, one optional space before a word or a
// punctuation run, a trailing space run, digit runs whole.
TEST(PreTokenizerDeepseekTest, LlmSplits) {
  EXPECT_EQ(Words(PreType::kDeepseekLlm, "Hi there, 2024!\n"),
            (W2{"Hi", " there", ",", " ", "2024", "!", "\n"}));
  EXPECT_EQ(Words(PreType::kDeepseekLlm, "ok   "), (W2{"ok", "   "}));
}

// tekken / gpt-4o split words where the case changes (llama.cpp's rewrite:
// upper = a letter that is not ASCII a-z), single digits vs. runs of three.
TEST(PreTokenizerCaseSplitTest, TekkenAndGpt4o) {
  EXPECT_EQ(Words(PreType::kTekken, "HelloWorld and CamelCase 42"),
            (W2{"Hello", "World", " and", " Camel", "Case", " ", "4", "2"}));
  EXPECT_EQ(Words(PreType::kTekken, "HELLOworld"), (W2{"HELLOworld"}));
  EXPECT_EQ(Words(PreType::kTekken, "a/b\n"), (W2{"a", "/b", "\n"}));  // one mark may lead a word
  EXPECT_EQ(Words(PreType::kGpt4o, "I'm OK 12345"), (W2{"I'm", " OK", " ", "123", "45"}));
  EXPECT_EQ(Words(PreType::kGpt4o, "don'T stop"), (W2{"don'T", " stop"}));
}

// poro / bloom / gpt3-finnish: runs between whitespace and sentence
// punctuation, which stay pieces of their own; viking then splits digits.
TEST(PreTokenizerPoroTest, PoroAndViking) {
  EXPECT_EQ(Words(PreType::kPoro, "Hello, world. Yes!"),
            (W2{"Hello", ",", " world", ".", " Yes", "!"}));
  EXPECT_EQ(Words(PreType::kPoro, "a\xE3\x80\x82" "b"), (W2{"a", "\xE3\x80\x82", "b"}));  // U+3002
  EXPECT_EQ(Words(PreType::kViking, "abc123 x"), (W2{"abc", "1", "2", "3", " x"}));
}

TEST(PreTokenizerDeepseekTest, NamesAreKnown) {
  EXPECT_EQ(internal::LookupPreType("tekken")->type, PreType::kTekken);
  EXPECT_TRUE(internal::LookupPreType("tekken")->ignore_merges);
  EXPECT_EQ(internal::LookupPreType("llama4")->type, PreType::kGpt4o);
  EXPECT_EQ(internal::LookupPreType("glm4")->type, PreType::kLlama3);
  EXPECT_EQ(internal::LookupPreType("viking")->type, PreType::kViking);
  EXPECT_EQ(internal::LookupPreType("hunyuan-dense")->type, PreType::kDeepseek3);
  EXPECT_EQ(internal::LookupPreType("minimax-m2")->type, PreType::kGpt4o);
  EXPECT_EQ(internal::LookupPreType("deepseek-llm")->type, PreType::kDeepseekLlm);
  EXPECT_EQ(internal::LookupPreType("deepseek-coder")->type, PreType::kDeepseekCoder);
  EXPECT_EQ(internal::LookupPreType("deepseek-v3")->type, PreType::kDeepseek3);
}

}  // namespace
}  // namespace mx::tokenizer
