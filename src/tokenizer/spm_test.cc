#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/env.h"

namespace mx::tokenizer {
namespace {

std::unique_ptr<Tokenizer> MakeTokenizer(VocabData data) {
  auto result = Tokenizer::Create(std::move(data));
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? std::move(result).value() : nullptr;
}

// --- SPM ----------------------------------------------------------------------

// A small SentencePiece vocabulary: <unk> <s> </s>, 256 byte tokens, then
// pieces with scores chosen so the merge order is known.
struct SpmFixture {
  VocabData data;
  std::map<std::string, int32_t> id;

  void Add(const std::string& text, float score, TokenType type = TokenType::kNormal) {
    id[text] = static_cast<int32_t>(data.tokens.size());
    data.tokens.push_back(text);
    data.scores.push_back(score);
    data.types.push_back(static_cast<int32_t>(type));
  }
  int32_t Byte(int b) const { return 3 + b; }

  SpmFixture() {
    data.model = "llama";
    Add("<unk>", 0, TokenType::kUnknown);
    Add("<s>", 0, TokenType::kControl);
    Add("</s>", 0, TokenType::kControl);
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      Add(name, 0, TokenType::kByte);
    }
    const std::string sp = "\xE2\x96\x81";  // ▁
    Add(sp, -5);
    for (const char* c : {"h", "e", "l", "o", "w", "r", "d", "i", "a"}) Add(c, -6);
    Add(sp + "h", -2);
    Add("he", -3);
    Add("ll", -1);
    Add("llo", -1.5);
    Add(sp + "he", -2.5);
    Add(sp + "hello", -0.5);
    Add(sp + "w", -2);
    Add("or", -2);
    Add(sp + "wor", -1.5);
    Add("ld", -2.2);
    Add(sp + "world", -1);
    Add(sp + "hi", -1);
    Add("aa", 0);
    Add("<|user|>", 0, TokenType::kUserDefined);
  }
  std::unique_ptr<Tokenizer> Build() { return MakeTokenizer(data); }
};

TEST(SpmTokenizerTest, KnownSegmentations) {
  SpmFixture f;
  auto tok = f.Build();
  ASSERT_NE(tok, nullptr);
  const std::string sp = "\xE2\x96\x81";
  EXPECT_TRUE(tok->is_spm());
  EXPECT_TRUE(tok->add_bos());
  EXPECT_TRUE(tok->add_space_prefix());
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->unk_id(), 0);
  EXPECT_EQ(tok->Encode("hello world", false, false),
            (std::vector<int32_t>{f.id[sp + "hello"], f.id[sp + "world"]}));
  EXPECT_EQ(tok->Encode("hello", true, false), (std::vector<int32_t>{1, f.id[sp + "hello"]}));
  // Equal scores: the leftmost pair merges first.
  EXPECT_EQ(tok->Encode("aaa", false, false),
            (std::vector<int32_t>{f.id[sp], f.id["aa"], f.id["a"]}));
  EXPECT_EQ(tok->TokenToPiece(f.id[sp + "hello"]), " hello");
  EXPECT_EQ(tok->Decode(tok->Encode("hello world", false, false)), " hello world");
}

TEST(SpmTokenizerTest, ByteFallback) {
  SpmFixture f;
  auto tok = f.Build();
  ASSERT_NE(tok, nullptr);
  const std::string sp = "\xE2\x96\x81";
  const auto ids = tok->Encode("\xC3\xA9", false, false);  // é has no piece
  EXPECT_EQ(ids, (std::vector<int32_t>{f.id[sp], f.Byte(0xC3), f.Byte(0xA9)}));
  EXPECT_EQ(tok->TokenToPiece(f.Byte(0xC3)), "\xC3");
  EXPECT_EQ(tok->Decode(ids), " \xC3\xA9");
  // Raw invalid bytes also go out as bytes; a stray lead byte swallows the next byte.
  EXPECT_EQ(tok->Encode("\xFF", false, false), (std::vector<int32_t>{f.id[sp], f.Byte(0xFF)}));
  EXPECT_EQ(tok->Encode("\xC3(", false, false),
            (std::vector<int32_t>{f.id[sp], f.Byte(0xC3), f.Byte('(')}));
}

TEST(SpmTokenizerTest, SpacePrefixAfterSpecialTokens) {
  SpmFixture f;
  const std::string sp = "\xE2\x96\x81";
  {
    auto tok = f.Build();
    ASSERT_NE(tok, nullptr);
    // User-defined tokens split out even without parse_special; the text after
    // a special token gets the prefix space again.
    EXPECT_EQ(tok->Encode("<|user|>hi", false, false),
              (std::vector<int32_t>{f.id["<|user|>"], f.id[sp + "hi"]}));
    EXPECT_EQ(tok->Encode("<s>hello", true, true),
              (std::vector<int32_t>{1, 1, f.id[sp + "hello"]}));
    // Without parse_special "<s>" is text: bytes, then "hello" merges without ▁.
    EXPECT_EQ(tok->Encode("<s>hello", false, false),
              (std::vector<int32_t>{f.id[sp], f.Byte('<'), f.Byte('s'), f.Byte('>'), f.id["he"],
                                    f.id["llo"]}));
    EXPECT_EQ(tok->TokenToPiece(1), "<s>");
  }
  {
    f.data.add_space_prefix = false;
    f.data.add_bos = false;
    f.data.add_eos = true;
    auto tok = f.Build();
    ASSERT_NE(tok, nullptr);
    EXPECT_EQ(tok->Encode("<|user|>hi", true, false),
              (std::vector<int32_t>{f.id["<|user|>"], f.id["h"], f.id["i"], 2}));
  }
}

TEST(SpmTokenizerTest, MissingByteTokensFallBackToUnk) {
  VocabData data;
  data.model = "llama";
  data.tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a"};
  data.types = {2, 3, 3, 1, 1};
  auto tok = MakeTokenizer(std::move(data));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("a\xC3\xA9", false, false), (std::vector<int32_t>{3, 4, 0, 0}));
}

TEST(SpmTokenizerTest, MegabytesOfTextEncodeAndDecodeBack) {
  SpmFixture f;
  auto tok = f.Build();
  ASSERT_NE(tok, nullptr);
  std::string text;
  while (text.size() < (2u << 20)) text += "hello world, the quick brown fox\n";
  const auto ids = tok->Encode(text, /*add_special=*/false, /*parse_special=*/false);
  ASSERT_GT(ids.size(), text.size() / 16);
  EXPECT_TRUE(tok->Decode(ids) == " " + text);  // the SPM space prefix comes back too
}

}  // namespace
}  // namespace mx::tokenizer
